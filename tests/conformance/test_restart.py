"""A broker stopped with SIGTERM (clean) or SIGKILL (unclean) comes back with everything it had
acknowledged: topics and their ids, records (acks=all), timestamps, topic configs and log start
offsets, and it appends after the old log end.

Driven by confluent-kafka (librdkafka) against a broker process the test starts and signals itself.
"""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
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
from tests.conformance.scenario import DELETE_BEFORE, DELETE_PARTITION, PARTITIONS, RDKAFKA_LOG, SOURCE_DYNAMIC_TOPIC

pytestmark = pytest.mark.timeout(120)

TIMEOUT_S = 10.0
CREATE_CONFIGS = {"max.message.bytes": "2000000"}  # set by CreateTopics
ALTERED_CONFIGS = {"retention.ms": "86400000"}  # set by IncrementalAlterConfigs
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # librdkafka's base64 of the all-zero Uuid


def admin_for(process) -> AdminClient:
    return AdminClient({"bootstrap.servers": process.bootstrap, "logger": RDKAFKA_LOG, "socket.timeout.ms": 10000})


def produce(process, flow, records) -> dict[tuple[int, int], bytes]:
    producer = Producer({"bootstrap.servers": process.bootstrap, "logger": RDKAFKA_LOG, "acks": "all", "linger.ms": 5})
    delivered = {}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered[(msg.partition(), msg.offset())] = msg.value()

    for r in records:
        producer.produce(
            flow.topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            timestamp=r.timestamp_ms,
            on_delivery=on_delivery,
        )
    assert producer.flush(20) == 0, "records still undelivered after 20 s"
    assert errors == []
    return delivered


def list_offsets(admin, flow, spec) -> dict[int, int]:
    futures = admin.list_offsets(
        {TopicPartition(flow.topic, p): spec for p in range(PARTITIONS)}, request_timeout=TIMEOUT_S
    )
    return {tp.partition: f.result(timeout=TIMEOUT_S).offset for tp, f in futures.items()}


def read_all(process, flow, start: dict[int, int], count: int) -> dict[int, list[tuple[int, bytes, int]]]:
    c = Consumer(
        {
            "bootstrap.servers": process.bootstrap,
            "logger": RDKAFKA_LOG,
            "group.id": "conformance-unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "fetch.wait.max.ms": 100,
        }
    )
    got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    try:
        c.assign([TopicPartition(flow.topic, p, o) for p, o in start.items()])
        deadline = time.monotonic() + 15
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.topic() is None:
                continue
            assert msg.error() is None, msg.error()
            got[msg.partition()].append((msg.offset(), msg.value(), msg.timestamp()[1]))
    finally:
        c.close()
    return got


def topic_state(process, flow) -> dict:
    admin = admin_for(process)
    (description,) = admin.describe_topics(TopicCollection([flow.topic]), request_timeout=TIMEOUT_S).values()
    description = description.result(timeout=TIMEOUT_S)
    resource = ConfigResource(ResourceType.TOPIC, flow.topic)
    configs = admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(timeout=TIMEOUT_S)
    return {
        "topic_id": str(description.topic_id),
        "partitions": sorted(p.id for p in description.partitions),
        "configs": {
            name: (configs[name].value, int(getattr(configs[name].source, "value", configs[name].source)))
            for name in {**CREATE_CONFIGS, **ALTERED_CONFIGS}
        },
        "earliest": list_offsets(admin, flow, OffsetSpec.earliest()),
        "latest": list_offsets(admin, flow, OffsetSpec.latest()),
        "by_time": list_offsets(admin, flow, OffsetSpec.for_timestamp(flow.mid_ts_ms)),
    }


def stop(process, sig: int) -> None:
    returncode = process.stop(sig)
    if sig == signal.SIGTERM:
        assert returncode == 0, f"SIGTERM must shut the broker down cleanly (exit 0), got {returncode}"
    else:
        assert returncode == -signal.SIGKILL


@pytest.mark.apis(
    "CreateTopics",
    "Metadata",
    "IncrementalAlterConfigs",
    "DescribeConfigs",
    "Produce",
    "Fetch",
    "ListOffsets",
    "DeleteRecords",
)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_restart_keeps_everything(broker_process, sig):
    flow = scenario.new_flow(f"restart-{signal.Signals(sig).name.lower()}")
    admin = admin_for(broker_process)
    futures = admin.create_topics(
        [NewTopic(flow.topic, num_partitions=PARTITIONS, replication_factor=1, config=CREATE_CONFIGS)],
        operation_timeout=TIMEOUT_S,
        request_timeout=TIMEOUT_S,
    )
    futures[flow.topic].result(timeout=TIMEOUT_S)
    resource = ConfigResource(
        ResourceType.TOPIC,
        flow.topic,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in ALTERED_CONFIGS.items()
        ],
    )
    admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)[resource].result(timeout=TIMEOUT_S)

    expected_delivered = {(p, o): r.value for p, rs in flow.layout().items() for o, r in enumerate(rs)}
    assert produce(broker_process, flow, flow.records) == expected_delivered
    (deleted,) = admin.delete_records(
        [TopicPartition(flow.topic, DELETE_PARTITION, DELETE_BEFORE)], request_timeout=TIMEOUT_S
    ).values()
    assert deleted.result(timeout=TIMEOUT_S).low_watermark == DELETE_BEFORE

    log_start = {p: DELETE_BEFORE if p == DELETE_PARTITION else 0 for p in range(PARTITIONS)}
    before = topic_state(broker_process, flow)
    assert before == {
        "topic_id": before["topic_id"],
        "partitions": list(range(PARTITIONS)),
        "configs": {
            **{k: (v, SOURCE_DYNAMIC_TOPIC) for k, v in CREATE_CONFIGS.items()},
            **{k: (v, SOURCE_DYNAMIC_TOPIC) for k, v in ALTERED_CONFIGS.items()},
        },
        "earliest": log_start,
        "latest": flow.latest(),
        "by_time": {p: flow.offset_for_time(p, flow.mid_ts_ms) for p in range(PARTITIONS)},
    }

    assert before["topic_id"] != ZERO_TOPIC_ID, "Metadata must carry the topic id"

    del admin  # no client of the old process left retrying in the background
    stop(broker_process, sig)
    broker_process.start()

    assert topic_state(broker_process, flow) == before
    remaining = sum(flow.latest()[p] - log_start[p] for p in range(PARTITIONS))
    got = read_all(broker_process, flow, log_start, remaining)
    for p, records in flow.layout().items():
        expected = [(o, r.value, r.timestamp_ms) for o, r in enumerate(records)][log_start[p] :]
        assert got[p] == expected, f"partition {p} after {signal.Signals(sig).name}"

    # Appends continue at the old log end, and they too survive the next stop.
    more = [
        scenario.Record(p, b"after-%d" % p, b"after-restart-%d" % p, flow.base_ts_ms + 500_000 + p, "all")
        for p in range(PARTITIONS)
    ]
    assert produce(broker_process, flow, more) == {
        (p, flow.latest()[p]): b"after-restart-%d" % p for p in range(PARTITIONS)
    }
    stop(broker_process, sig)
    broker_process.start()
    after = topic_state(broker_process, flow)
    assert after["latest"] == {p: n + 1 for p, n in flow.latest().items()}
    assert after["earliest"] == log_start
    got = read_all(broker_process, flow, flow.latest(), PARTITIONS)
    assert {p: [(o, v) for o, v, _ in g] for p, g in got.items()} == {
        p: [(flow.latest()[p], b"after-restart-%d" % p)] for p in range(PARTITIONS)
    }
