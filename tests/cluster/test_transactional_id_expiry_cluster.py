"""`transactional.id.expiration.ms` on three brokers and ZooKeeper, `__transaction_state` of one
partition replicated three times: an idle id expires at its coordinator, the tombstone reaches every
replica's log, and after kill -9 of the coordinator the new one (restarted beforehand with an
expiration too long to remove anything itself) replays the partition without the expired id, while
an id with an open transaction comes back Ongoing."""

from __future__ import annotations

import signal

import pytest

from broker.txn import TRANSACTION_STATE_TOPIC
from broker.txn.state_log import key_bytes
from protocol.messages import AddPartitionsToTxnRequest, InitProducerIdRequest
from protocol.records import RecordBatch, build_batch
from tests.broker.data_wire import WireClient, produce
from tests.cluster.test_transactions_cluster import coordinator_of, described_at
from tests.cluster.three_brokers import NODES, E, in_sync, leader_of, new_topic, segment_batches, three_brokers
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

LONG_MS = str(7 * 24 * 3600 * 1000)


@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory):
    settings = {"transaction.state.log.replication.factor": "3", "transaction.state.log.num.partitions": "1",
                "transaction.state.log.min.isr": "2", "transactional.id.expiration.ms": "5000",
                "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
                "auto.leader.rebalance.enable": "false"}
    with three_brokers(f"{zk_server.connect}/txn-expiry", tmp_path_factory.mktemp("txn-expiry"),
                       extra=settings) as brokers:
        yield brokers


def _init(broker, transactional_id: str, timeout_ms: int = 60_000):
    """InitProducerId at the coordinator, retried while it loads the partition."""
    answers = []

    def ask() -> bool:
        with WireClient(broker.port) as client:
            answers.append(client.request(InitProducerIdRequest(
                transactional_id=transactional_id, transaction_timeout_ms=timeout_ms), 4))
        return answers[-1].error_code == E.NONE
    wait_for(ask, timeout_s=30, what=f"InitProducerId for {transactional_id}")
    return answers[-1]


def _tombstoned(broker, transactional_id: str) -> bool:
    key = key_bytes(transactional_id)
    return any(record.key == key and record.value is None
               for data in segment_batches(broker, TRANSACTION_STATE_TOPIC) for record in RecordBatch(data).records())


def test_an_expired_id_stays_gone_at_the_next_coordinator(cluster):
    topic = new_topic(cluster, prefix="expiring")
    node = coordinator_of(cluster, "c-open")
    coordinator = cluster[node]
    opened = _init(coordinator, "c-open", timeout_ms=600_000)
    with WireClient(coordinator.port) as client:
        add = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="c-open", v3_and_below_producer_id=opened.producer_id,
            v3_and_below_producer_epoch=opened.producer_epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])])
        assert client.request(add, 3).results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == E.NONE
    data = build_batch([(None, b"o", [], 1)], producer_id=opened.producer_id, producer_epoch=opened.producer_epoch,
                       base_sequence=0, is_transactional=True)
    with WireClient(leader_of(cluster, topic).port) as client:
        assert produce(client, topic, 0, data, acks=-1, transactional_id="c-open").error_code == E.NONE
    _init(coordinator, "c-idle")
    assert coordinator_of(cluster, "c-idle") == node  # one partition: one coordinator for both

    wait_for(lambda: described_at(coordinator, "c-idle")[0] == E.TRANSACTIONAL_ID_NOT_FOUND, timeout_s=30,
             what="c-idle expired at its coordinator")
    assert described_at(coordinator, "c-open") == (E.NONE, "Ongoing")
    wait_for(lambda: all(_tombstoned(b, "c-idle") for b in cluster.values()), timeout_s=30,
             what="the tombstone in every replica's log")

    others = [n for n in NODES if n != node]
    for other in others:  # the next coordinator must not expire anything itself
        cluster[other].overrides["transactional.id.expiration.ms"] = LONG_MS
        cluster[other].restart()
        wait_for(lambda: all(in_sync(cluster[n], t, 0) for n in NODES for t in (TRANSACTION_STATE_TOPIC, topic)),
                 timeout_s=60, what=f"broker {other} back in every ISR")
    cluster[node].stop(signal.SIGKILL)
    successor = wait_for(lambda: (n := coordinator_of({o: cluster[o] for o in others}, "c-open")) in others and n,
                         timeout_s=60, what="a new coordinator")
    wait_for(lambda: described_at(cluster[successor], "c-open") == (E.NONE, "Ongoing"), timeout_s=30,
             what="c-open replayed at the new coordinator")
    assert described_at(cluster[successor], "c-idle")[0] == E.TRANSACTIONAL_ID_NOT_FOUND
    again = _init(cluster[successor], "c-idle")
    assert again.producer_epoch == 0
