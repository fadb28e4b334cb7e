"""kafka-python 3 runs the conformance flow (see scenario.py) unmodified.

kafka-python specifics: acks=all turns idempotence on (InitProducerId, then batches with a producer
id and sequence numbers), Fetch v12 asking for a fetch session (epoch 0), ListOffsets v9, and
alter_configs() first calls DescribeConfigs and refuses any key that is not listed as dynamic, then
sends IncrementalAlterConfigs because key 44 is advertised. With auto_offset_reset='none' a fetch
below the log start offset raises OffsetOutOfRangeError from poll(); with 'earliest' the consumer
resets to the log start offset.
"""

from __future__ import annotations

import time
from contextlib import closing

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource
from kafka.errors import OffsetOutOfRangeError

from tests.conformance import scenario
from tests.conformance.scenario import (
    ALTER_KEY,
    ALTER_VALUE,
    DELETE_BEFORE,
    DELETE_PARTITION,
    PARTITIONS,
    TOPIC_CONFIG_DEFAULTS,
    check_default_topic_configs,
)
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 10_000
NOT_OVERRIDDEN = {"DEFAULT_CONFIG", "STATIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"}


@pytest.fixture(scope="module")
def flow():
    return scenario.new_flow("kafka-python")


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    yield client
    client.close()


def consumer(broker, auto_offset_reset: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=auto_offset_reset,
        fetch_max_wait_ms=100,
        request_timeout_ms=TIMEOUT_MS,
    )


def partitions(flow) -> list[TopicPartition]:
    return [TopicPartition(flow.topic, p) for p in range(PARTITIONS)]


def by_partition(offsets: dict) -> dict[int, object]:
    return {tp.partition: offset for tp, offset in offsets.items()}


def describe(admin, flow) -> dict:
    result = admin.describe_configs([ConfigResource("TOPIC", flow.topic)], config_filter="all")
    return result["topic"][flow.topic]


@pytest.mark.apis("CreateTopics", "Metadata")
def test_create_topic(admin, flow):
    admin.create_topics({flow.topic: {"num_partitions": PARTITIONS, "replication_factor": 1}}, timeout_ms=TIMEOUT_MS)

    def described():
        (topic,) = admin.describe_topics([flow.topic])
        return topic["error_code"] == 0 and sorted(p["partition_index"] for p in topic["partitions"])

    assert wait_for(described, what="the topic in Metadata") == list(range(PARTITIONS))
    flow.done.add("create")


@pytest.mark.apis("Produce", "Metadata")
# acks=all turns idempotence on in kafka-python 3: InitProducerId first.
@pytest.mark.parametrize("acks", ["1", pytest.param("all", marks=pytest.mark.apis("InitProducerId"))])
def test_produce(broker, flow, acks):
    flow.require("create")
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        acks=1 if acks == "1" else "all",
        linger_ms=5,
        request_timeout_ms=TIMEOUT_MS,
        max_block_ms=TIMEOUT_MS,
    )
    try:
        sent = [
            (r, producer.send(flow.topic, value=r.value, key=r.key, partition=r.partition, timestamp_ms=r.timestamp_ms))
            for r in flow.by_acks(acks)
        ]
        producer.flush(timeout=20)
        delivered = {(m.partition, m.offset): r.value for r, m in ((r, f.get(timeout=10)) for r, f in sent)}
    finally:
        producer.close(timeout=5)
    expected = {
        (p, offset): r.value for p, rs in flow.layout().items() for offset, r in enumerate(rs) if r.acks == acks
    }
    assert delivered == expected
    flow.done.add(f"produce-{acks}")


@pytest.mark.apis("Fetch", "Metadata")
def test_consume_assigned(broker, flow):
    flow.require("produce-1", "produce-all")
    c = consumer(broker, "none")
    got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    try:
        c.assign(partitions(flow))
        for tp in partitions(flow):
            c.seek(tp, 0)
        deadline = time.monotonic() + 15
        while sum(map(len, got.values())) < len(flow.records) and time.monotonic() < deadline:
            for tp, records in c.poll(timeout_ms=500).items():
                got[tp.partition] += [(m.offset, m.key, m.value, m.timestamp, m.timestamp_type) for m in records]
    finally:
        c.close()
    for p, records in flow.layout().items():
        assert [g[0] for g in got[p]] == list(range(len(records))), f"partition {p} offsets"
        assert [g[2] for g in got[p]] == [r.value for r in records], f"partition {p} values"
        assert [g[1] for g in got[p]] == [r.key for r in records], f"partition {p} keys"
        assert [(g[3], g[4]) for g in got[p]] == [(r.timestamp_ms, 0) for r in records], f"partition {p} timestamps"


@pytest.mark.apis("ListOffsets")
def test_list_offsets_earliest(broker, flow):
    flow.require("produce-1", "produce-all")
    with closing(consumer(broker, "none")) as c:
        assert by_partition(c.beginning_offsets(partitions(flow))) == {p: 0 for p in range(PARTITIONS)}


@pytest.mark.apis("ListOffsets")
def test_list_offsets_latest(broker, flow):
    flow.require("produce-1", "produce-all")
    with closing(consumer(broker, "none")) as c:
        assert by_partition(c.end_offsets(partitions(flow))) == flow.latest()


@pytest.mark.apis("ListOffsets")
def test_list_offsets_by_time(broker, flow):
    flow.require("produce-1", "produce-all")
    with closing(consumer(broker, "none")) as c:
        mid = by_partition(c.offsets_for_times({tp: flow.mid_ts_ms for tp in partitions(flow)}))
        future = by_partition(c.offsets_for_times({tp: flow.future_ts_ms for tp in partitions(flow)}))
    assert {p: (o.offset if o else None) for p, o in mid.items()} == {
        p: flow.offset_for_time(p, flow.mid_ts_ms) for p in range(PARTITIONS)
    }
    # No record at or after the timestamp: the broker answers -1 and kafka-python gives None.
    assert future == {p: None for p in range(PARTITIONS)}


@pytest.mark.apis("DeleteRecords", "ListOffsets")
def test_delete_records(broker, admin, flow):
    flow.require("produce-1", "produce-all")
    tp = TopicPartition(flow.topic, DELETE_PARTITION)
    result = admin.delete_records({tp: DELETE_BEFORE}, timeout_ms=TIMEOUT_MS)
    assert result[tp]["low_watermark"] == DELETE_BEFORE
    with closing(consumer(broker, "none")) as c:
        earliest = by_partition(c.beginning_offsets(partitions(flow)))
    assert earliest == {p: DELETE_BEFORE if p == DELETE_PARTITION else 0 for p in range(PARTITIONS)}
    flow.done.add("delete-records")


@pytest.mark.apis("Fetch", "ListOffsets")
def test_read_below_log_start(broker, flow):
    flow.require("delete-records")
    tp = TopicPartition(flow.topic, DELETE_PARTITION)

    # auto_offset_reset='none': poll() raises OffsetOutOfRangeError naming the partition and offset.
    c = consumer(broker, "none")
    try:
        c.assign([tp])
        c.seek(tp, 0)
        with pytest.raises(OffsetOutOfRangeError) as raised:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                records = c.poll(timeout_ms=500)
                assert not records, f"read {records} below the log start offset"
    finally:
        c.close()
    assert raised.value.args[0] == {tp: 0}

    # auto_offset_reset='earliest': the consumer resets to the log start offset.
    c = consumer(broker, "earliest")
    try:
        c.assign([tp])
        c.seek(tp, 0)
        first = None
        deadline = time.monotonic() + 15
        while first is None and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500, max_records=1).values():
                first = records[0]
    finally:
        c.close()
    assert first is not None, "nothing read after the reset to earliest"
    assert (first.offset, first.value) == (DELETE_BEFORE, flow.values(DELETE_PARTITION)[DELETE_BEFORE])


@pytest.mark.apis("DescribeConfigs")
def test_describe_configs(admin, flow):
    flow.require("create")
    configs = describe(admin, flow)
    check_default_topic_configs({n: c["value"] for n, c in configs.items()},
                                {n: c["config_source"] for n, c in configs.items()}, NOT_OVERRIDDEN)


@pytest.mark.apis("IncrementalAlterConfigs", "DescribeConfigs")
def test_alter_configs(admin, flow):
    flow.require("create")
    # alter_configs() validates the key against DescribeConfigs' dynamic keys, then uses
    # IncrementalAlterConfigs (SET); reset_configs() sends DELETE.
    result = admin.alter_configs([ConfigResource("TOPIC", flow.topic, {ALTER_KEY: ALTER_VALUE})])
    assert result == {"topic": {flow.topic: "OK"}}
    entry = describe(admin, flow)[ALTER_KEY]
    assert (entry["value"], entry["config_source"]) == (ALTER_VALUE, "DYNAMIC_TOPIC_CONFIG")
    assert admin.describe_configs([ConfigResource("TOPIC", flow.topic)])["topic"][flow.topic].keys() == {ALTER_KEY}

    result = admin.reset_configs([ConfigResource("TOPIC", flow.topic, [ALTER_KEY])])
    assert result == {"topic": {flow.topic: "OK"}}
    entry = describe(admin, flow)[ALTER_KEY]
    assert entry["value"] == TOPIC_CONFIG_DEFAULTS[ALTER_KEY]
    assert entry["config_source"] in NOT_OVERRIDDEN


@pytest.mark.apis("DeleteTopics", "Metadata")
def test_delete_topic(admin, flow):
    flow.require("create")
    admin.delete_topics([flow.topic], timeout_ms=TIMEOUT_MS)
    wait_for(lambda: flow.topic not in admin.list_topics(), what="the topic to leave Metadata")
