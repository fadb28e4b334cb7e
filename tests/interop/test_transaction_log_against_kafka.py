"""Transactions version 2 leaves the same trace on Ebb as on Apache Kafka 4.3.1: the same wire
session on each (a fresh Ebb, a fresh KRaft Kafka node from the pinned jars; Produce v12 adding its
partition, EndTxn v5 aborting and then committing at the bumped epoch, TxnOffsetCommit v5 adding the
group) writes the same `__transaction_state` records, as Kafka's own DumpLogSegments decodes them
(`--transaction-log-decoder`: states, epochs, partitions, the client's transaction version, the
tagged producer ids), and `kafka-features describe` prints the same transaction.version line.

Producer ids and times are each broker's own and are normalised; Kafka also lists the KRaft features
Ebb claims no level of (metadata.version, kraft.version, group.version, ...: broker/features.py),
which are left out of the comparison, as is the finalized features epoch (each cluster's count)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.messages import FindCoordinatorRequest, TxnOffsetCommitRequest
from protocol.records import build_batch
from tests.broker.data_wire import list_offsets_request, produce_request
from tests.differential.runner import Peer
from tests.differential.test_transactions_against_kafka import _create, _end, _ready_producer, _wait
from tests.interop.conftest import on_ebb_and_kafka

DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
TOPIC = "tv2-logged"
TXN = "tv2-logged-txn"
T0 = int(time.time() * 1000)
# Kafka's test node runs one offsets partition (offsets.topic.num.partitions=1), Ebb its default 50
_OFFSETS_PARTITION = re.compile(r'"__consumer_offsets","partitionIds":\[\d+\]')
_OWN = re.compile(r'"(producerId|previousProducerId|nextProducerId|transactionLastUpdateTimestampMs|'
                  r'transactionStartTimestampMs)":(-?\d+)')


def _offsets(pid: int, epoch: int) -> TxnOffsetCommitRequest:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    return TxnOffsetCommitRequest(
        transactional_id=TXN, group_id="tv2-logged-group", producer_id=pid, producer_epoch=epoch, generation_id=-1,
        member_id="", topics=[T(name=TOPIC, partitions=[T.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])])


def _session(peer: Peer) -> None:
    _create(peer, TOPIC)
    _wait(f"{peer.name}: a group coordinator", lambda: peer.send(FindCoordinatorRequest(
        key_type=0, coordinator_keys=["tv2-logged-group"]), 4).coordinators[0].error_code == ErrorCode.NONE)
    ready = _ready_producer(peer, TXN)
    pid, epoch = ready.producer_id, ready.producer_epoch
    for commit in (False, True):  # a new epoch each time: sequences start at 0
        batch = build_batch([(None, b"v", [], T0)], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                            is_transactional=True)
        reply = peer.send(produce_request(TOPIC, 0, batch, acks=-1, transactional_id=TXN), 12)
        assert reply.responses[0].partition_responses[0].error_code == 0
        if commit:
            assert peer.send(_offsets(pid, epoch), 5).topics[0].partitions[0].error_code == 0
        ended = peer.send(_end(TXN, pid, epoch, commit), 5)
        assert ended.error_code == 0
        stable = 4 if commit else 2  # a batch and its marker each time
        _wait(f"{peer.name}: the marker", lambda stable=stable: peer.send(list_offsets_request(
            TOPIC, 0, -1, isolation_level=1), 7).topics[0].partitions[0].offset == stable)
        epoch = ended.producer_epoch


def _normalised(value: str) -> str:
    """Times and producer ids are the broker's own: ids are named by their order of appearance."""
    ids: dict[str, str] = {}

    def own(match: re.Match) -> str:
        if match[2] == "-1":
            return match[0]
        if "Timestamp" in match[1]:
            return f'"{match[1]}":"<time>"'
        return f'"{match[1]}":"<id {ids.setdefault(match[2], str(len(ids)))}>"'
    return _OFFSETS_PARTITION.sub('"__consumer_offsets","partitionIds":["<group\'s>"]', _OWN.sub(own, value))


def _state_records(java, logs: Path, expected: int) -> list[str]:
    """The id's `__transaction_state` values as DumpLogSegments prints them, own values normalised."""
    found: list[str] = []
    deadline = time.monotonic() + 30  # the Complete states follow the markers
    while len(found) < expected and time.monotonic() < deadline:
        found = []
        # one DumpLogSegments (its --files takes a comma-separated list) for the segments with records, in order:
        # a JVM per segment of the 50 partitions took most of the test
        segments = [str(s) for s in sorted(logs.glob("__transaction_state-*/*.log")) if s.stat().st_size]
        if segments:
            dumped = java.run(DUMP_LOG, "--files", ",".join(segments), "--transaction-log-decoder")
            assert dumped.returncode == 0, dumped.stderr[-2000:]
            for line in dumped.stdout.splitlines():
                if f'"transactionalId":"{TXN}"' in line and " payload: " in line:
                    found.append(_normalised(line.split(" payload: ", 1)[1]))
        if len(found) < expected:
            time.sleep(0.2)
    return found


def _transaction_version(java, bootstrap: str) -> list[str]:
    run = java.tool(bootstrap, FEATURES, "describe")
    assert run.returncode == 0, run.stderr[-2000:]
    return [re.sub(r"Epoch:\s*\d+", "Epoch: <epoch>", " ".join(line.split()))
            for line in run.stdout.splitlines() if "transaction.version" in line]


def _play(java, port: int, bootstrap: str, logs: Path) -> tuple[list[str], list[str]]:
    peer = Peer("broker", port)
    try:
        _session(peer)
    finally:
        peer.close()
    return _state_records(java, logs, 8), _transaction_version(java, bootstrap)


@pytest.fixture(scope="module")
def traces(java, tmp_path_factory) -> tuple[tuple, tuple]:
    return on_ebb_and_kafka(tmp_path_factory,
                            lambda server, _: _play(java, server.port, server.bootstrap, server.data_dir / "logs"))


def test_the_transaction_log_decodes_as_kafkas(traces):
    (ours, _), (theirs, _) = traces
    assert len(theirs) >= 8, theirs
    assert [json.loads(v) for v in ours] == [json.loads(v) for v in theirs], \
        "\n".join(["Ebb:", *ours, "Kafka:", *theirs])


def test_kafka_features_describe_prints_the_same_transaction_version(traces):
    (_, ours), (_, theirs) = traces
    assert ours == theirs and len(ours) == 1, f"Ebb: {ours}\nKafka: {theirs}"
