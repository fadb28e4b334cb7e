"""confluent-kafka (librdkafka) runs the conformance flow (see scenario.py) unmodified.

librdkafka specifics: ListOffsets v7 from the admin client, Fetch v16 by topic id when Metadata
carries one, read_committed by default, DeleteRecords v2, DescribeConfigs v1 (its cap) and
IncrementalAlterConfigs v1. With auto.offset.reset=error a fetch below the log start offset
surfaces as a consumer error _AUTO_OFFSET_RESET; with earliest it resumes at the log start offset.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from tests.conformance import scenario
from tests.conformance.scenario import (
    ALTER_KEY,
    ALTER_VALUE,
    DELETE_BEFORE,
    DELETE_PARTITION,
    PARTITIONS,
    RDKAFKA_LOG,
    SOURCE_DYNAMIC_TOPIC,
    SOURCES_NOT_OVERRIDDEN,
    TOPIC_CONFIG_DEFAULTS,
    check_default_topic_configs,
)
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(60)

TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def flow():
    return scenario.new_flow("confluent")


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA_LOG, "socket.timeout.ms": 10000})


def consumer(broker, **config) -> Consumer:
    # The Python binding insists on a group.id; the consumer is only ever assigned partitions and
    # never joins the group or commits.
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "logger": RDKAFKA_LOG,
            "group.id": "conformance-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 100,
            "socket.timeout.ms": 10000,
            **config,
        }
    )


def partition_message(msg) -> bool:
    """A record or a partition's error; client-level errors (no topic) are librdkafka's own business."""
    return msg.topic() is not None


def list_offsets(admin, flow, spec) -> dict[int, int]:
    futures = admin.list_offsets(
        {TopicPartition(flow.topic, p): spec for p in range(PARTITIONS)}, request_timeout=TIMEOUT_S
    )
    return {tp.partition: f.result(timeout=TIMEOUT_S).offset for tp, f in futures.items()}


def describe(admin, flow) -> dict:
    resource = ConfigResource(ResourceType.TOPIC, flow.topic)
    return admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(timeout=TIMEOUT_S)


def source(entry) -> int:
    """ConfigEntry.source is the wire's int (a ConfigSource enum in some versions)."""
    return int(getattr(entry.source, "value", entry.source))


@pytest.mark.apis("CreateTopics", "Metadata")
def test_create_topic(broker, admin, flow):
    futures = admin.create_topics(
        [NewTopic(flow.topic, num_partitions=PARTITIONS, replication_factor=1)],
        operation_timeout=TIMEOUT_S,
        request_timeout=TIMEOUT_S,
    )
    futures[flow.topic].result(timeout=TIMEOUT_S)

    def partitions():
        topic = admin.list_topics(topic=flow.topic, timeout=TIMEOUT_S).topics.get(flow.topic)
        return topic is not None and topic.error is None and sorted(topic.partitions)

    assert wait_for(partitions, what="the topic in Metadata") == list(range(PARTITIONS))
    flow.done.add("create")


@pytest.mark.apis("Produce", "Metadata")
@pytest.mark.parametrize("acks", scenario.ACKS)
def test_produce(broker, flow, acks):
    flow.require("create")
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "logger": RDKAFKA_LOG,
            "acks": acks,
            "linger.ms": 5,
            "message.timeout.ms": 15000,
            "socket.timeout.ms": 10000,
        }
    )
    delivered = []

    def on_delivery(err, msg):
        delivered.append((err, msg.partition(), msg.offset(), msg.value()))

    for r in flow.by_acks(acks):
        producer.produce(
            flow.topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            timestamp=r.timestamp_ms,
            on_delivery=on_delivery,
        )
    assert producer.flush(20) == 0, "records still undelivered after 20 s"
    assert [d for d in delivered if d[0] is not None] == []
    # Offsets are assigned in send order within each partition; acks=1 goes first.
    expected = {
        (p, offset): r.value for p, rs in flow.layout().items() for offset, r in enumerate(rs) if r.acks == acks
    }
    assert {(p, offset): value for _, p, offset, value in delivered} == expected
    flow.done.add(f"produce-{acks}")


@pytest.mark.apis("Fetch", "Metadata")
def test_consume_assigned(broker, flow):
    flow.require("produce-1", "produce-all")
    c = consumer(broker, **{"auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(flow.topic, p, 0) for p in range(PARTITIONS)])
        got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 15
        while sum(map(len, got.values())) < len(flow.records) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or not partition_message(msg):
                continue
            assert msg.error() is None, msg.error()
            got[msg.partition()].append((msg.offset(), msg.key(), msg.value(), msg.timestamp()))
    finally:
        c.close()
    for p, records in flow.layout().items():
        assert [g[0] for g in got[p]] == list(range(len(records))), f"partition {p} offsets"
        assert [g[2] for g in got[p]] == [r.value for r in records], f"partition {p} values"
        assert [g[1] for g in got[p]] == [r.key for r in records], f"partition {p} keys"
        # (TIMESTAMP_CREATE_TIME, ts)
        assert [g[3] for g in got[p]] == [(1, r.timestamp_ms) for r in records], f"partition {p} timestamps"


@pytest.mark.apis("ListOffsets")
def test_list_offsets_earliest(admin, flow):
    flow.require("produce-1", "produce-all")
    assert list_offsets(admin, flow, OffsetSpec.earliest()) == {p: 0 for p in range(PARTITIONS)}


@pytest.mark.apis("ListOffsets")
def test_list_offsets_latest(admin, flow):
    flow.require("produce-1", "produce-all")
    assert list_offsets(admin, flow, OffsetSpec.latest()) == flow.latest()


@pytest.mark.apis("ListOffsets")
def test_list_offsets_by_time(admin, flow):
    flow.require("produce-1", "produce-all")
    assert list_offsets(admin, flow, OffsetSpec.for_timestamp(flow.mid_ts_ms)) == {
        p: flow.offset_for_time(p, flow.mid_ts_ms) for p in range(PARTITIONS)
    }
    # No record at or after the timestamp: Kafka answers offset -1.
    assert list_offsets(admin, flow, OffsetSpec.for_timestamp(flow.future_ts_ms)) == {p: -1 for p in range(PARTITIONS)}


@pytest.mark.apis("DeleteRecords", "ListOffsets")
def test_delete_records(admin, flow):
    flow.require("produce-1", "produce-all")
    futures = admin.delete_records(
        [TopicPartition(flow.topic, DELETE_PARTITION, DELETE_BEFORE)],
        request_timeout=TIMEOUT_S,
        operation_timeout=TIMEOUT_S,
    )
    (result,) = (f.result(timeout=TIMEOUT_S) for f in futures.values())
    assert result.low_watermark == DELETE_BEFORE
    earliest = list_offsets(admin, flow, OffsetSpec.earliest())
    assert earliest == {p: DELETE_BEFORE if p == DELETE_PARTITION else 0 for p in range(PARTITIONS)}
    flow.done.add("delete-records")


@pytest.mark.apis("Fetch", "ListOffsets")
def test_read_below_log_start(broker, flow):
    flow.require("delete-records")
    below = TopicPartition(flow.topic, DELETE_PARTITION, 0)

    # auto.offset.reset=error: the out-of-range fetch is surfaced as a consumer error.
    c = consumer(broker, **{"auto.offset.reset": "error"})
    try:
        c.assign([below])
        error = None
        deadline = time.monotonic() + 15
        while error is None and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or not partition_message(msg):
                continue
            assert msg.error() is not None, f"read offset {msg.offset()} below the log start offset"
            error = msg.error()
    finally:
        c.close()
    assert error is not None, "no error within 15 s for a fetch below the log start offset"
    assert error.code() == KafkaError._AUTO_OFFSET_RESET, error
    assert "out of range" in error.str().lower(), error

    # auto.offset.reset=earliest: librdkafka resets to the log start offset and reads on from there.
    c = consumer(broker, **{"auto.offset.reset": "earliest"})
    try:
        c.assign([below])
        first = None
        deadline = time.monotonic() + 15
        while first is None and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and partition_message(msg):
                assert msg.error() is None, msg.error()
                first = msg
    finally:
        c.close()
    assert first is not None, "nothing read after the reset to earliest"
    assert (first.offset(), first.value()) == (DELETE_BEFORE, flow.values(DELETE_PARTITION)[DELETE_BEFORE])


@pytest.mark.apis("DescribeConfigs")
def test_describe_configs(admin, flow):
    flow.require("create")
    configs = describe(admin, flow)
    check_default_topic_configs({n: e.value for n, e in configs.items()}, {n: source(e) for n, e in configs.items()})


@pytest.mark.apis("IncrementalAlterConfigs", "DescribeConfigs")
def test_incremental_alter_configs(admin, flow):
    flow.require("create")

    def alter(op, value):
        entry = ConfigEntry(ALTER_KEY, value, incremental_operation=op)
        resource = ConfigResource(ResourceType.TOPIC, flow.topic, incremental_configs=[entry])
        futures = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)
        futures[resource].result(timeout=TIMEOUT_S)

    alter(AlterConfigOpType.SET, ALTER_VALUE)
    entry = describe(admin, flow)[ALTER_KEY]
    assert (entry.value, source(entry)) == (ALTER_VALUE, SOURCE_DYNAMIC_TOPIC)

    alter(AlterConfigOpType.DELETE, None)
    entry = describe(admin, flow)[ALTER_KEY]
    assert entry.value == TOPIC_CONFIG_DEFAULTS[ALTER_KEY]
    assert source(entry) in SOURCES_NOT_OVERRIDDEN


@pytest.mark.apis("DeleteTopics", "Metadata")
def test_delete_topic(admin, flow):
    flow.require("create")
    futures = admin.delete_topics([flow.topic], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
    futures[flow.topic].result(timeout=TIMEOUT_S)
    wait_for(
        lambda: flow.topic not in admin.list_topics(timeout=TIMEOUT_S).topics, what="the topic to leave Metadata"
    )
