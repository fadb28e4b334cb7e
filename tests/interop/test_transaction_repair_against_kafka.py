"""Kafka's `kafka-transactions` repairs transactions on Ebb as on Apache Kafka 4.3.1, printing the same.

On each broker (a fresh Ebb, a fresh KRaft Kafka node, both with
`transaction.partition.verification.enable=false`, which lets a producer write transactional data
to a partition its coordinator never heard of) a hanging transaction is made: the producer of
`hung` writes a transactional batch to partition 0 without AddPartitionsToTxn, so its coordinator
(Empty) never sends a marker and the partition's last stable offset stays below it. Another id
(`stuck`) opens an ordinary transaction on partition 1. Then the tool's
`find-hanging` (by partition and by broker) finds the first, `abort --start-offset` writes its
ABORT marker (DescribeProducers, then WriteTxnMarkers to the leader) and the LSO reaches the high
watermark; `forceTerminateTransaction` fences `stuck`'s producer and aborts its transaction.
Producer ids, times and durations are each broker's own and are normalised by column; the rest of
every line is compared, with the exit code, and each broker's offsets afterwards. Records carry the
time their session began, so `find-hanging`'s age in whole minutes is 0 on both brokers (a
module-wide time printed 15 on one and 16 on the other when the minute turned between them).
"""

from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode
from protocol.messages import AddPartitionsToTxnRequest, CreateTopicsRequest
from protocol.records import build_batch
from tests.broker.data_wire import list_offsets_request, produce_request
from tests.differential.runner import Peer
from tests.differential.test_transactions_against_kafka import _ready_producer
from tests.interop.conftest import on_ebb_and_kafka
from tests.interop.test_tools_against_kafka import normalise
from tests.interop.test_transaction_tools_against_kafka import TRANSACTIONS, _columns
from tests.support.polling import wait_for

TOPIC = "repaired"
OVERRIDES = {"transaction.partition.verification.enable": "false"}


def _offsets(peer: Peer, partition: int) -> tuple[int, int]:
    """(high watermark, last stable offset)."""
    return tuple(peer.send(list_offsets_request(TOPIC, partition, -1, isolation_level=level), 7)
                 .topics[0].partitions[0].offset for level in (0, 1))


def _batch(ready, t0: int, *values: bytes) -> bytes:
    return build_batch([(None, v, [], t0) for v in values], producer_id=ready.producer_id,
                       producer_epoch=ready.producer_epoch, base_sequence=0, is_transactional=True)


def _set_up(peer: Peer, t0: int):
    topic = CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1)
    peer.send(CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7)
    peer.wait_for_leaders(TOPIC, 2)
    plain = build_batch([(None, b"before", [], t0)])
    for partition in (0, 1):  # Kafka's partition may answer NOT_LEADER_OR_FOLLOWER for a moment
        wait_for(lambda: peer.send(produce_request(TOPIC, partition, plain, acks=-1), 9)  # noqa: B023
                 .responses[0].partition_responses[0].error_code == 0, what=f"{peer.name}: a first record")
    hung = _ready_producer(peer, "hung")  # Empty at its coordinator, for good
    reply = peer.send(produce_request(TOPIC, 0, _batch(hung, t0, b"h0", b"h1"), acks=-1, transactional_id="hung"), 9)
    assert reply.responses[0].partition_responses[0].error_code == 0
    stuck = _ready_producer(peer, "stuck")
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="stuck", v3_and_below_producer_id=stuck.producer_id,
        v3_and_below_producer_epoch=stuck.producer_epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[1])])
    assert peer.send(add, 3).results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    reply = peer.send(produce_request(TOPIC, 1, _batch(stuck, t0, b"s0"), acks=-1, transactional_id="stuck"), 9)
    assert reply.responses[0].partition_responses[0].error_code == 0
    assert (_offsets(peer, 0), _offsets(peer, 1)) == ((3, 1), (2, 1))
    return hung


def play(java, port: int, bootstrap: str, node_id: int) -> dict[str, object]:
    peer = Peer("broker", port)
    answers: dict[str, object] = {}

    def tool(label: str, *args: str) -> None:
        run = java.tool(bootstrap, TRANSACTIONS, *args)
        answers[label] = (run.returncode, _columns(normalise(run.stdout + run.stderr, bootstrap)))

    try:
        t0 = int(time.time() * 1000)
        hung = _set_up(peer, t0)
        tool("describe-producers before", "describe-producers", "--topic", TOPIC, "--partition", "0")
        tool("find-hanging in the partition", "find-hanging", "--topic", TOPIC, "--partition", "0",
             "--max-transaction-timeout", "0")
        tool("find-hanging on the broker", "find-hanging", "--broker-id", str(node_id),
             "--max-transaction-timeout", "0")
        tool("abort at a wrong offset", "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "2")
        tool("abort the hanging one", "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "1")
        answers["offsets after the abort"] = wait_for(lambda: (o := _offsets(peer, 0)) == (4, 4) and o,
                                                      what="the abort marker and the LSO")
        tool("describe-producers after", "describe-producers", "--topic", TOPIC, "--partition", "0")
        tool("find-hanging after", "find-hanging", "--topic", TOPIC, "--partition", "0",
             "--max-transaction-timeout", "0")
        # Hung again (its next sequence after the marker), then aborted as brokers before 3.0 need it.
        batch = build_batch([(None, b"h2", [], t0)], producer_id=hung.producer_id, producer_epoch=hung.producer_epoch,
                            base_sequence=2, is_transactional=True)
        reply = peer.send(produce_request(TOPIC, 0, batch, acks=-1, transactional_id="hung"), 9)
        assert reply.responses[0].partition_responses[0].error_code == 0
        tool("abort naming producer, epoch and coordinator epoch", "abort", "--topic", TOPIC, "--partition", "0",
             "--start-offset", "4", "--producer-id", str(hung.producer_id), "--producer-epoch", "0",
             "--coordinator-epoch", "0")
        answers["offsets after the second abort"] = wait_for(lambda: (o := _offsets(peer, 0)) == (6, 6) and o,
                                                             what="the second abort marker")
        tool("force-terminate the stuck one", "forceTerminateTransaction", "--transactionalId", "stuck")
        answers["offsets after force-terminate"] = wait_for(lambda: (o := _offsets(peer, 1)) == (3, 3) and o,
                                                            what="the forced abort's marker")
        tool("describe the stuck one", "describe", "--transactional-id", "stuck")
        tool("force-terminate an unknown id", "forceTerminateTransaction", "--transactionalId", "never-was")
        reply = peer.send(produce_request(TOPIC, 1, build_batch([(None, b"late", [], t0)], producer_id=-1), acks=-1), 9)
        answers["plain produce after"] = ErrorCode(reply.responses[0].partition_responses[0].error_code).name
    finally:
        peer.close()
    return answers


@pytest.fixture(scope="module")
def sessions(java, tmp_path_factory) -> tuple[dict, dict]:
    # node id 1 on both (BrokerProcess's node.id, the node's own)
    return on_ebb_and_kafka(tmp_path_factory, lambda server, _: play(java, server.port, server.bootstrap, 1), OVERRIDES)


LABELS = ["describe-producers before", "find-hanging in the partition", "find-hanging on the broker",
          "abort at a wrong offset", "abort the hanging one", "offsets after the abort", "describe-producers after",
          "find-hanging after", "abort naming producer, epoch and coordinator epoch", "offsets after the second abort",
          "force-terminate the stuck one", "offsets after force-terminate",
          "describe the stuck one", "force-terminate an unknown id", "plain produce after"]


@pytest.mark.parametrize("label", LABELS)
def test_kafka_transactions_repairs_as_against_kafka(sessions, label):
    ours, theirs = (side[label] for side in sessions)
    assert ours == theirs, f"{label}:\nEbb:   {ours}\nKafka: {theirs}"
