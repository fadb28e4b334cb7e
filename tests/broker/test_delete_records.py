"""DeleteRecords v0-v3 through the wire, one table row per edge of Kafka's semantics (KIP-107, issue 4),
plus what follows a deletion: the earliest offset, reads below it, durability across a crash."""

import signal
from dataclasses import dataclass

import pytest

from protocol.codec import UnsupportedFieldValue
from protocol.errors import ErrorCode
from protocol.messages import DeleteRecordsRequest
from tests.broker.data_wire import (
    WireClient,
    batch,
    create_topic,
    delete_records,
    delete_records_request,
    ensure_internal_topic,
    fetch,
    list_offsets,
    produce,
)
from tests.support.broker_process import BrokerProcess

NONE, OUT_OF_RANGE = ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE


@dataclass(frozen=True)
class Case:
    id: str
    offset: int
    error: ErrorCode
    low_watermark: int            # -1 on errors
    records: int = 10             # offsets 0-4 and 5-9, two batches
    configs: tuple = ()
    first_delete: int | None = None  # a deletion done before the one under test
    topic: str | None = None      # a fixed (missing) topic instead of a fresh one
    partition: int = 0


CASES = [
    Case("minus-one-is-the-high-watermark", -1, NONE, 10),
    Case("exactly-the-high-watermark", 10, NONE, 10),
    Case("inside-a-batch", 3, NONE, 3),
    Case("at-a-batch-boundary", 5, NONE, 5),
    Case("zero-on-a-fresh-partition", 0, NONE, 0),
    Case("above-the-high-watermark", 11, OUT_OF_RANGE, -1),
    Case("far-above-the-high-watermark", 2**62, OUT_OF_RANGE, -1),
    Case("minus-two", -2, OUT_OF_RANGE, -1),
    Case("very-negative", -(2**63), OUT_OF_RANGE, -1),
    Case("at-the-log-start-is-a-no-op", 5, NONE, 5, first_delete=5),
    Case("below-the-log-start-is-a-no-op", 2, NONE, 5, first_delete=5),
    Case("minus-one-again-after-a-deletion", -1, NONE, 10, first_delete=4),
    Case("empty-partition-minus-one", -1, NONE, 0, records=0),
    Case("empty-partition-above", 1, OUT_OF_RANGE, -1, records=0),
    Case("compact-policy", 3, ErrorCode.POLICY_VIOLATION, -1, configs=(("cleanup.policy", "compact"),)),
    Case("compact-policy-minus-one", -1, ErrorCode.POLICY_VIOLATION, -1, configs=(("cleanup.policy", "compact"),)),
    Case("compact-policy-is-checked-before-the-offset", -5, ErrorCode.POLICY_VIOLATION, -1,
         configs=(("cleanup.policy", "compact"),)),
    Case("compact-and-delete-policy", 3, NONE, 3, configs=(("cleanup.policy", "compact,delete"),)),
    Case("unknown-topic", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, topic="no-such-topic"),
    Case("unknown-partition", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, partition=4),
    Case("internal-topic", 0, ErrorCode.INVALID_TOPIC_EXCEPTION, -1, topic="__consumer_offsets"),
]
MODES = [(0, False), (1, False), (2, False), (3, False), (3, True)]

_topics = iter(range(100_000))


def _prepare(client, case: Case) -> str:
    if case.topic is not None:
        return ensure_internal_topic(client, case.topic) if case.topic.startswith("__") else case.topic
    name = f"dr-{next(_topics)}"
    create_topic(client, name, 1, dict(case.configs))
    if case.records:
        for first in range(0, case.records, 5):
            numbers = range(first, first + 5)  # keyed: a compacted topic refuses records without a key
            records = batch([b"r%d" % i for i in numbers], keys=[b"k%d" % i for i in numbers])
            assert produce(client, name, 0, records).error_code == 0
    if case.first_delete is not None:
        assert delete_records(client, name, 0, case.first_delete).error_code == NONE
    return name


@pytest.mark.parametrize("version, leader_only", MODES, ids=[f"v{v}{'-leader-only' if lo else ''}" for v, lo in MODES])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_delete_records_edges(client, case, version, leader_only):
    name = _prepare(client, case)
    reply = client.request(delete_records_request({name: {case.partition: case.offset}}, leader_only=leader_only),
                           version)
    assert reply.throttle_time_ms == 0
    [topic] = reply.topics
    [result] = topic.partitions
    assert (topic.name, result.partition_index) == (name, case.partition)
    assert (ErrorCode(result.error_code), result.low_watermark) == (case.error, case.low_watermark)
    if version >= 3:
        assert result.leader_log_start_offset == case.low_watermark  # the leader's, -1 on errors
    if case.error == NONE:
        earliest = list_offsets(client, name, 0, -2)
        assert earliest.offset == case.low_watermark
        if case.low_watermark > 0:
            assert fetch(client, name, 0, case.low_watermark - 1).error_code == OUT_OF_RANGE
        at_start = fetch(client, name, 0, case.low_watermark)
        assert at_start.error_code == NONE and at_start.log_start_offset == case.low_watermark


def test_results_are_per_partition_and_topic(client):
    name = f"dr-{next(_topics)}"
    create_topic(client, name, 3)
    for p in range(3):
        produce(client, name, p, batch([b"a", b"b", b"c"]))
    reply = client.request(delete_records_request({name: {0: 2, 1: 9, 2: -1, 7: 0}, "missing": {0: 1}}), 2)
    got = {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in reply.topics for p in t.partitions}
    assert got == {(name, 0): (NONE, 2), (name, 1): (OUT_OF_RANGE, -1), (name, 2): (NONE, 3),
                   (name, 7): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
                   ("missing", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}


def test_a_partition_listed_twice_counts_once_with_its_last_offset(client):
    name = f"dr-{next(_topics)}"
    create_topic(client, name, 1)
    produce(client, name, 0, batch([b"a", b"b", b"c", b"d"]))
    reply = client.request(delete_records_request([(name, [(0, 3), (0, 1)])]), 2)
    assert [(p.partition_index, p.low_watermark) for t in reply.topics for p in t.partitions] == [(0, 1)]


def test_segments_below_the_log_start_offset_go(client):
    name = f"dr-{next(_topics)}"
    create_topic(client, name, 1, {"segment.bytes": "1024"})
    for _ in range(20):
        produce(client, name, 0, batch([b"x" * 200]))
    assert delete_records(client, name, 0, 15).low_watermark == 15
    assert list_offsets(client, name, 0, -2).offset == 15
    assert fetch(client, name, 0, 14).error_code == OUT_OF_RANGE
    assert [r for r in fetch(client, name, 0, 15).records]  # data from 15 on is still there


def test_deletion_is_durable_across_a_crash(tmp_path):
    with BrokerProcess(tmp_path) as process:
        with WireClient(process.port) as c:
            create_topic(c, "durable", 1)
            produce(c, "durable", 0, batch([b"a", b"b", b"c", b"d", b"e"]))
            assert delete_records(c, "durable", 0, 3, version=3, leader_only=True).leader_log_start_offset == 3
        process.restart(signal.SIGKILL)
        with WireClient(process.port) as c:
            assert list_offsets(c, "durable", 0, -2).offset == 3
            assert fetch(c, "durable", 0, 2).error_code == OUT_OF_RANGE


def test_v3_refused_when_disabled(tmp_path):
    with BrokerProcess(tmp_path, overrides={"delete.records.v3.enable": "false"}) as process:
        with WireClient(process.port) as c:
            assert c.versions()[21] == (0, 2)
            create_topic(c, "old", 1)
            produce(c, "old", 0, batch([b"a", b"b"]))
            reply = c.request(delete_records_request({"old": {0: 1}}, leader_only=True), 3)
            result = reply.topics[0].partitions[0]
            assert (result.error_code, result.low_watermark, result.leader_log_start_offset) == \
                (ErrorCode.UNSUPPORTED_VERSION, -1, -1)
            assert list_offsets(c, "old", 0, -2).offset == 0
            assert delete_records(c, "old", 0, 1, version=2).low_watermark == 1


def test_leader_only_is_not_ignorable_below_v3():
    with pytest.raises(UnsupportedFieldValue, match="LeaderOnly"):  # never dropped silently
        DeleteRecordsRequest[2].encode(DeleteRecordsRequest(topics=[], timeout_ms=1, leader_only=True))


def test_leader_only_forces_the_checkpoint_when_it_is_not_synced(tmp_path):
    with BrokerProcess(tmp_path, overrides={"log.start.offset.checkpoint.sync": "false",
                                            "log.flush.start.offset.checkpoint.interval.ms": "3600000"}) as process:
        with WireClient(process.port) as c:
            create_topic(c, "lazy", 1)
            produce(c, "lazy", 0, batch([b"a", b"b", b"c", b"d"]))
            assert delete_records(c, "lazy", 0, 2, version=3, leader_only=True).leader_log_start_offset == 2
        process.restart(signal.SIGKILL)
        with WireClient(process.port) as c:
            assert list_offsets(c, "lazy", 0, -2).offset == 2
