"""Transactions on three broker processes and a real ZooKeeper, one cluster for the module:
librdkafka's transactional producer (confluent-kafka) writes to partitions led by different brokers,
the transaction coordinator (leader of the id's `__transaction_state` partition) sends the markers to
the other leaders with WriteTxnMarkers, and read_committed consumers read it back.

- Commits and aborts across three leaders: a read_committed reader sees exactly the committed
  records, and the last stable offset reaches the high watermark on every partition.
- kill -9 of the coordinator after AddPartitionsToTxn, before EndTxn: the client finds the new
  coordinator (which loaded the Ongoing state from the replicated log) and the transaction commits;
  all of it is visible and no LSO stays behind. A preferred election then moves the id's partition
  back to the restarted broker: the live old coordinator answers NOT_COORDINATOR, the producer
  commits its next transaction at the new one.
- kill -9 of the coordinator right after EndTxn was answered (PrepareCommit written): the new one
  completes the transaction (markers sent again).
- kill -9 of a partition leader before EndTxn: the marker for that partition is retried until the
  new leader takes it.
- A transaction its producer abandons, with its coordinator killed: the new coordinator aborts it at
  transaction.timeout.ms, and nothing of it is ever visible.
- KIP-890 part 1 with raw requests: a leader that is not the id's coordinator asks it
  (AddPartitionsToTxn v4, verify-only) before a transaction's first batch there: a partition not added
  is refused INVALID_TXN_STATE, an added one taken; once the transaction committed (its marker
  written), the producer's next batch there is refused until the partition is added again.
- sendOffsetsToTransaction with the group's coordinator on another broker than the transaction's:
  the offsets count once the COMMIT marker reaches `__consumer_offsets` there, not after an abort;
  with raw requests, that group coordinator asks the id's coordinator (AddPartitionsToTxn v4) whether
  the group was added to the transaction: TxnOffsetCommit before AddOffsetsToTxn is refused
  (INVALID_TXN_STATE, TRANSACTION_ABORTABLE at v4), after it taken.
Every wait is on an event (answers, offsets), bounded; "stuck" means longer than the producer's
transaction.timeout.ms after the brokers are back.
"""

from __future__ import annotations

import itertools
import signal
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from broker.group.offsets_store import partition_for
from broker.txn import TRANSACTION_STATE_TOPIC
from protocol.enums import CoordinatorType, ElectionType, IsolationLevel, SpecialTimestamp
from protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from protocol.records import build_batch
from tests.broker.data_wire import WireClient, list_offsets, produce_request
from tests.cluster.test_leader_election import elect
from tests.cluster.three_brokers import NODES, E, in_sync, new_topic, partition_state, three_brokers
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

TXN_TIMEOUT_MS = 15_000
SETTLE_S = TXN_TIMEOUT_MS / 1000 + 15  # the timeout, plus an election (ZooKeeper session) and a cleanup round
PARTITIONS = 3
_ids = itertools.count()


def transaction_cluster(zk_server, tmp_path_factory, name: str):
    """Three brokers under the ZooKeeper chroot /`name`, `__transaction_state` replicated three ways,
    timed-out transactions looked for every 500 ms, leaders left where the faults put them."""
    settings = {"transaction.state.log.replication.factor": "3", "transaction.state.log.num.partitions": "3",
                "transaction.state.log.min.isr": "2",
                "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
                "auto.leader.rebalance.enable": "false"}
    return three_brokers(f"{zk_server.connect}/{name}", tmp_path_factory.mktemp(name), extra=settings)


@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory):
    with transaction_cluster(zk_server, tmp_path_factory, "transactions") as brokers:
        yield brokers


def alive(cluster) -> list:
    return [b for b in cluster.values() if b.process is not None and b.process.poll() is None]


def bootstrap(cluster) -> str:
    return ",".join(b.bootstrap for b in cluster.values())


def coordinator_of(cluster, key: str, key_type: CoordinatorType = CoordinatorType.TRANSACTION) -> int:
    """FindCoordinator as a client asks it, retried until some alive broker names one."""
    found: list[int] = []

    def ask() -> bool:
        for broker in alive(cluster):
            try:
                with WireClient(broker.port) as client:
                    answer = client.request(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), 4)
            except OSError:
                continue
            [coordinator] = answer.coordinators
            if coordinator.error_code == E.NONE:
                found.append(coordinator.node_id)
                return True
        return False
    wait_for(ask, timeout_s=30, what=f"a coordinator for {key}")
    return found[-1]


def description_at(broker, transactional_id: str):
    """DescribeTransactions' answer for the id at one broker."""
    with WireClient(broker.port) as client:
        answer = client.request(DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0)
    [found] = answer.transaction_states
    return found


def described_at(broker, transactional_id: str) -> tuple[int, str]:
    """(error code, state) of DescribeTransactions for the id at one broker."""
    found = description_at(broker, transactional_id)
    return found.error_code, found.transaction_state


def state_of(cluster, transactional_id: str) -> str | None:
    """The transaction's state as its coordinator describes it."""
    code, state = described_at(cluster[coordinator_of(cluster, transactional_id)], transactional_id)
    return state if code == E.NONE else None


def spread_topic(cluster) -> str:
    """A topic of three partitions whose leaders are three different brokers."""
    topic = new_topic(cluster, partitions=PARTITIONS, prefix="txn")
    leaders = {partition_state(cluster[1], topic, p).leader_id for p in range(PARTITIONS)}
    assert leaders == set(NODES), leaders
    return topic


def producer(cluster, transactional_id: str) -> Producer:
    made = Producer({"bootstrap.servers": bootstrap(cluster), "transactional.id": transactional_id,
                     "transaction.timeout.ms": TXN_TIMEOUT_MS})
    made.init_transactions(60)
    return made


def write(made: Producer, topic: str, prefix: str) -> list[bytes]:
    """One record per partition, on the brokers (AddPartitionsToTxn answered) when this returns."""
    values = [f"{prefix}-{p}".encode() for p in range(PARTITIONS)]
    for p, value in enumerate(values):
        made.produce(topic, value, partition=p)
    assert made.flush(60) == 0
    return values


def lso_and_hw(cluster, topic: str, index: int) -> tuple[int, int] | None:
    """(last stable offset, high watermark) at the partition's leader, None while it has none."""
    for broker in alive(cluster):
        try:
            leader = partition_state(broker, topic, index).leader_id
            target = cluster[leader]
            with WireClient(target.port) as client:
                stable = list_offsets(client, topic, index, SpecialTimestamp.LATEST,
                                      isolation_level=IsolationLevel.READ_COMMITTED)
                high = list_offsets(client, topic, index, SpecialTimestamp.LATEST)
        except (OSError, KeyError, StopIteration):
            continue
        if stable.error_code == E.NONE and high.error_code == E.NONE:
            return stable.offset, high.offset
    return None


def stable(cluster, topic: str, index: int) -> bool:
    """The partition holds no open transaction: its LSO is its high watermark."""
    found = lso_and_hw(cluster, topic, index)
    return found is not None and found[0] == found[1]


def stable_everywhere(cluster, topic: str) -> bool:
    """No partition holds an open transaction: LSO == high watermark on each."""
    return all(stable(cluster, topic, p) for p in range(PARTITIONS))


def read_committed(cluster, topic: str) -> list[bytes]:
    """Every record a read_committed consumer gets from the topic, read up to each partition's end."""
    ends = {p: lso_and_hw(cluster, topic, p) for p in range(PARTITIONS)}
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": f"reader-{topic}-{next(_ids)}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            positions = {tp.partition: tp.offset for tp in consumer.position(
                [TopicPartition(topic, p) for p in range(PARTITIONS)])}
            if all(positions[p] >= ends[p][1] for p in range(PARTITIONS) if ends[p] is not None):
                break
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return sorted(got)


def kill(cluster, node: int) -> None:
    cluster[node].stop(signal.SIGKILL)


def restart(cluster, node: int, topics: list[str]) -> None:
    cluster[node].start()
    wait_for(lambda: all(in_sync(b, t, p) for b in alive(cluster) for t in topics for p in range(PARTITIONS)),
             timeout_s=60, what=f"broker {node} back in every ISR")


def test_commits_and_aborts_across_three_leaders(cluster):
    topic = spread_topic(cluster)
    made = producer(cluster, f"spread-{next(_ids)}")
    made.begin_transaction()
    first = write(made, topic, "commit-1")
    made.commit_transaction(60)
    made.begin_transaction()
    write(made, topic, "abort")
    made.abort_transaction(60)
    made.begin_transaction()
    last = write(made, topic, "commit-2")
    made.commit_transaction(60)
    wait_for(lambda: stable_everywhere(cluster, topic), timeout_s=SETTLE_S, what="the LSO at the HW everywhere")
    assert read_committed(cluster, topic) == sorted(first + last)
    for p in range(PARTITIONS):  # per partition three records, each followed by its marker
        assert lso_and_hw(cluster, topic, p) == (6, 6)


def _txn_produce(cluster, leader: int, topic: str, index: int, transactional_id: str, ids, sequence: int) -> int:
    batch = build_batch([(None, f"raw-{sequence}".encode(), [], int(time.time() * 1000))],
                        producer_id=ids.producer_id, producer_epoch=ids.producer_epoch, base_sequence=sequence,
                        is_transactional=True)
    with WireClient(cluster[leader].port) as client:
        answer = client.request(produce_request(topic, index, batch, acks=-1, transactional_id=transactional_id), 9)
    return answer.responses[0].partition_responses[0].error_code


def _init_producer(cluster, coordinator: int, transactional_id: str):
    """InitProducerId at the id's coordinator, retried until it answers (it may still be loading)."""
    found: list = []

    def initialised() -> bool:
        with WireClient(cluster[coordinator].port) as client:
            found.append(client.request(InitProducerIdRequest(transactional_id=transactional_id,
                                                              transaction_timeout_ms=60_000), 4))
        return found[-1].error_code == E.NONE
    wait_for(initialised, timeout_s=30, what="a producer id")
    return found[-1]


def test_a_leader_verifies_transactional_batches_with_the_coordinator(cluster):
    topic = spread_topic(cluster)
    transactional_id = f"verified-{next(_ids)}"
    coordinator = coordinator_of(cluster, transactional_id)
    led_elsewhere = [(p, partition_state(cluster[1], topic, p).leader_id) for p in range(PARTITIONS)]
    (added, added_leader), (not_added, other_leader) = [(p, b) for p, b in led_elsewhere if b != coordinator]
    ids = _init_producer(cluster, coordinator, transactional_id)

    def add(index: int) -> None:
        with WireClient(cluster[coordinator].port) as client:
            answer = client.request(AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=ids.producer_id,
                v3_and_below_producer_epoch=ids.producer_epoch, v3_and_below_topics=[
                    AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[index])]), 3)
        assert answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.NONE

    add(added)
    assert _txn_produce(cluster, other_leader, topic, not_added, transactional_id, ids, 0) == E.INVALID_TXN_STATE
    assert _txn_produce(cluster, added_leader, topic, added, transactional_id, ids, 0) == E.NONE
    assert _txn_produce(cluster, added_leader, topic, added, transactional_id, ids, 1) == E.NONE  # open here now
    with WireClient(cluster[coordinator].port) as client:
        ended = client.request(EndTxnRequest(transactional_id=transactional_id, producer_id=ids.producer_id,
                                             producer_epoch=ids.producer_epoch, committed=True), 3)
    assert ended.error_code == E.NONE
    wait_for(lambda: state_of(cluster, transactional_id) == "CompleteCommit", timeout_s=30, what="the commit")
    wait_for(lambda: lso_and_hw(cluster, topic, added) == (3, 3), timeout_s=30, what="the marker at the leader")
    # The transaction is over: a batch for a new one is refused until the partition is added to it.
    assert _txn_produce(cluster, added_leader, topic, added, transactional_id, ids, 2) == E.INVALID_TXN_STATE
    add(added)
    assert _txn_produce(cluster, added_leader, topic, added, transactional_id, ids, 2) == E.NONE
    assert lso_and_hw(cluster, topic, not_added) == (0, 0)  # the refused batch was never written


def test_a_group_coordinator_verifies_txn_offsets_with_the_transactions_coordinator(cluster):
    topic = spread_topic(cluster)
    transactional_id = f"offsets-verified-{next(_ids)}"
    group, coordinator = _group_elsewhere(cluster, transactional_id)
    group_coordinator = coordinator_of(cluster, group, CoordinatorType.GROUP)
    ids = _init_producer(cluster, coordinator, transactional_id)
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic

    def commit_offsets(version: int) -> int:
        with WireClient(cluster[group_coordinator].port) as client:
            answer = client.request(TxnOffsetCommitRequest(
                transactional_id=transactional_id, group_id=group, producer_id=ids.producer_id,
                producer_epoch=ids.producer_epoch, generation_id=-1, member_id="", group_instance_id=None,
                topics=[T(name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata="")])]),
                version)
        return answer.topics[0].partitions[0].error_code

    assert commit_offsets(3) == E.INVALID_TXN_STATE  # the group not in the transaction
    assert commit_offsets(4) == E.TRANSACTION_ABORTABLE
    with WireClient(cluster[coordinator].port) as client:
        added = client.request(AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=ids.producer_id,
                                                      producer_epoch=ids.producer_epoch, group_id=group), 3)
    assert added.error_code == E.NONE
    assert commit_offsets(3) == E.NONE
    with WireClient(cluster[coordinator].port) as client:
        ended = client.request(EndTxnRequest(transactional_id=transactional_id, producer_id=ids.producer_id,
                                             producer_epoch=ids.producer_epoch, committed=True), 3)
    assert ended.error_code == E.NONE
    wait_for(lambda: committed_offsets(cluster, group, topic)[0] == 7, timeout_s=30,
             what="the offsets committed with the transaction")

def test_coordinator_killed_before_end_txn(cluster):
    topic = spread_topic(cluster)
    transactional_id = f"lose-coordinator-{next(_ids)}"
    made = producer(cluster, transactional_id)
    made.begin_transaction()
    before = write(made, topic, "before")
    made.commit_transaction(60)
    made.begin_transaction()
    during = write(made, topic, "during")  # every partition added (Ongoing written, replicated)
    victim = coordinator_of(cluster, transactional_id)
    kill(cluster, victim)
    try:
        made.commit_transaction(60)  # re-finds the coordinator: the new leader of the id's partition
        committed = True
    except KafkaException as exc:  # the client gave up: the coordinator aborts it at the timeout
        assert exc.args[0].txn_requires_abort() or not exc.args[0].retriable(), exc
        committed = False
    new = coordinator_of(cluster, transactional_id)
    assert new != victim
    wait_for(lambda: stable_everywhere(cluster, topic), timeout_s=SETTLE_S, what="the LSO at the HW everywhere")
    assert read_committed(cluster, topic) == sorted(before + (during if committed else []))
    assert committed, "librdkafka's commit went through the new coordinator"
    restart(cluster, victim, [topic])

    # A preferred election gives the id's partition back to the restarted broker: the live coordinator
    # drops the id (NOT_COORDINATOR), the other loads it, and the producer goes on there.
    index = partition_for(transactional_id, PARTITIONS)
    assert partition_state(cluster[new], TRANSACTION_STATE_TOPIC, index).replica_nodes[0] == victim
    wait_for(lambda: in_sync(cluster[new], TRANSACTION_STATE_TOPIC, index), timeout_s=60,
             what="the restarted broker back in the state partition's ISR")
    assert elect(cluster[new], ElectionType.PREFERRED, TRANSACTION_STATE_TOPIC, index) == E.NONE
    wait_for(lambda: coordinator_of(cluster, transactional_id) == victim, what="the coordinator moved back")
    wait_for(lambda: described_at(cluster[victim], transactional_id) == (E.NONE, "CompleteCommit"),
             what="the state loaded where it moved")
    assert described_at(cluster[new], transactional_id)[0] == E.NOT_COORDINATOR
    made.begin_transaction()
    after = write(made, topic, "after")
    made.commit_transaction(60)
    wait_for(lambda: stable_everywhere(cluster, topic), timeout_s=SETTLE_S, what="the LSO at the HW everywhere")
    assert read_committed(cluster, topic) == sorted(before + during + after)


def test_coordinator_killed_after_end_txn(cluster):
    topic = spread_topic(cluster)
    transactional_id = f"prepared-{next(_ids)}"
    made = producer(cluster, transactional_id)
    victim = coordinator_of(cluster, transactional_id)
    made.begin_transaction()
    values = write(made, topic, "prepared")
    made.commit_transaction(60)  # answered once PrepareCommit is replicated; markers may still be on their way
    kill(cluster, victim)
    wait_for(lambda: stable_everywhere(cluster, topic), timeout_s=SETTLE_S, what="the LSO at the HW everywhere")
    assert read_committed(cluster, topic) == sorted(values)
    assert coordinator_of(cluster, transactional_id) != victim
    restart(cluster, victim, [topic])


def test_partition_leader_killed_while_markers_are_pending(cluster):
    topic = spread_topic(cluster)
    transactional_id = f"lose-leader-{next(_ids)}"
    made = producer(cluster, transactional_id)
    coordinator = coordinator_of(cluster, transactional_id)
    made.begin_transaction()
    values = write(made, topic, "pending")
    index = next(p for p in range(PARTITIONS) if partition_state(cluster[coordinator], topic, p).leader_id
                 != coordinator)
    victim = partition_state(cluster[coordinator], topic, index).leader_id
    kill(cluster, victim)  # its partition's marker cannot be written until a new leader is elected
    made.commit_transaction(60)
    wait_for(lambda: stable_everywhere(cluster, topic), timeout_s=SETTLE_S, what="the LSO at the HW everywhere")
    assert partition_state(cluster[coordinator], topic, index).leader_id != victim
    assert read_committed(cluster, topic) == sorted(values)
    restart(cluster, victim, [topic])
    assert read_committed(cluster, topic) == sorted(values)


def test_an_abandoned_transaction_is_aborted_by_the_new_coordinator(cluster):
    topic = spread_topic(cluster)
    transactional_id = f"abandoned-{next(_ids)}"
    made = producer(cluster, transactional_id)
    made.begin_transaction()
    write(made, topic, "abandoned")  # and never committed nor aborted by its producer
    victim = coordinator_of(cluster, transactional_id)
    kill(cluster, victim)
    started = time.monotonic()
    assert not stable_everywhere(cluster, topic)
    wait_for(lambda: stable_everywhere(cluster, topic), timeout_s=SETTLE_S, what="the timed-out transaction aborted")
    assert time.monotonic() - started < SETTLE_S
    assert read_committed(cluster, topic) == []
    assert state_of(cluster, transactional_id) == "CompleteAbort"
    restart(cluster, victim, [topic])
    del made


def _group_elsewhere(cluster, transactional_id: str) -> tuple[str, int]:
    """A group whose coordinator is another broker than the transaction's (so the offsets' marker
    travels by WriteTxnMarkers)."""
    txn_coordinator = coordinator_of(cluster, transactional_id)
    for n in itertools.count():
        group = f"offsets-{transactional_id}-{n}"
        if coordinator_of(cluster, group, CoordinatorType.GROUP) != txn_coordinator:
            return group, txn_coordinator
    raise AssertionError("unreachable")


def committed_offsets(cluster, group: str, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return [tp.offset for tp in found]


def test_offsets_sent_to_a_transaction_count_once_it_commits(cluster):
    topic = spread_topic(cluster)
    transactional_id = f"offsets-{next(_ids)}"
    made = producer(cluster, transactional_id)
    group, _ = _group_elsewhere(cluster, transactional_id)
    reader = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": group, "enable.auto.commit": False})
    try:
        metadata = reader.consumer_group_metadata()
        made.begin_transaction()
        write(made, topic, "with-offsets")
        made.send_offsets_to_transaction([TopicPartition(topic, p, 5) for p in range(PARTITIONS)], metadata, 60)
        made.commit_transaction(60)
        wait_for(lambda: committed_offsets(cluster, group, topic) == [5] * PARTITIONS, timeout_s=30,
                 what="the offsets committed with the transaction")
        made.begin_transaction()
        made.send_offsets_to_transaction([TopicPartition(topic, p, 9) for p in range(PARTITIONS)], metadata, 60)
        made.abort_transaction(60)
        wait_for(lambda: state_of(cluster, transactional_id) == "CompleteAbort", timeout_s=30,
                 what="the abort's markers written")
        assert committed_offsets(cluster, group, topic) == [5] * PARTITIONS
    finally:
        reader.close()
