"""aiokafka runs the conformance flow (see scenario.py) unmodified.

aiokafka specifics: ApiVersions v0, Metadata v5, Produce v7, Fetch v11, ListOffsets v3,
DeleteRecords v2, DescribeConfigs v2, and the legacy AlterConfigs (33) as its only way to alter a
config (it refuses before sending anything if the broker does not advertise key 33). Its admin
client hands back the raw responses. With auto_offset_reset='none' a fetch below the log start
offset raises OffsetOutOfRangeError from getmany(); with 'earliest' it resets to the log start.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import OffsetOutOfRangeError

from tests.conformance import scenario
from tests.conformance.scenario import (
    ALTER_KEY,
    ALTER_VALUE,
    DELETE_BEFORE,
    DELETE_PARTITION,
    PARTITIONS,
    SOURCE_DYNAMIC_TOPIC,
)

pytestmark = pytest.mark.timeout(60)

TIMEOUT_MS = 10_000
TIMEOUT_S = TIMEOUT_MS / 1000


@pytest.fixture(scope="module")
def flow():
    return scenario.new_flow("aiokafka")


@contextlib.asynccontextmanager
async def admin_client(broker):
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    await asyncio.wait_for(admin.start(), TIMEOUT_S)
    try:
        yield admin
    finally:
        await asyncio.wait_for(admin.close(), TIMEOUT_S)


@contextlib.asynccontextmanager
async def consumer(broker, auto_offset_reset: str):
    c = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset=auto_offset_reset,
        fetch_max_wait_ms=100,
        request_timeout_ms=TIMEOUT_MS,
    )
    await asyncio.wait_for(c.start(), TIMEOUT_S)
    try:
        yield c
    finally:
        await asyncio.wait_for(c.stop(), TIMEOUT_S)


def partitions(flow) -> list[TopicPartition]:
    return [TopicPartition(flow.topic, p) for p in range(PARTITIONS)]


def by_partition(offsets: dict) -> dict[int, object]:
    return {tp.partition: offset for tp, offset in offsets.items()}


async def describe(admin, flow) -> dict[str, dict]:
    (response,) = await asyncio.wait_for(
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, flow.topic)]), TIMEOUT_S
    )
    (resource,) = response.to_object()["resources"]
    assert resource["error_code"] == 0, resource
    return {e["config_names"]: e for e in resource["config_entries"]}


@pytest.mark.apis("CreateTopics", "Metadata")
async def test_create_topic(broker, flow):
    async with admin_client(broker) as admin:
        response = await asyncio.wait_for(
            admin.create_topics([NewTopic(flow.topic, PARTITIONS, 1)], timeout_ms=TIMEOUT_MS), TIMEOUT_S
        )
        assert [(t["topic"], t["error_code"]) for t in response.to_object()["topic_errors"]] == [(flow.topic, 0)]
        deadline = time.monotonic() + 10
        while True:
            (topic,) = await asyncio.wait_for(admin.describe_topics([flow.topic]), TIMEOUT_S)
            if topic["error_code"] == 0 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
    assert topic["error_code"] == 0, topic
    assert sorted(p["partition"] for p in topic["partitions"]) == list(range(PARTITIONS))
    flow.done.add("create")


@pytest.mark.apis("Produce", "Metadata")
@pytest.mark.parametrize("acks", scenario.ACKS)
async def test_produce(broker, flow, acks):
    flow.require("create")
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap,
        acks=1 if acks == "1" else "all",
        linger_ms=5,
        request_timeout_ms=TIMEOUT_MS,
    )
    await asyncio.wait_for(producer.start(), TIMEOUT_S)
    try:
        futures = [
            await producer.send(
                flow.topic, value=r.value, key=r.key, partition=r.partition, timestamp_ms=r.timestamp_ms
            )
            for r in flow.by_acks(acks)
        ]
        metadata = await asyncio.wait_for(asyncio.gather(*futures), 20)
    finally:
        await asyncio.wait_for(producer.stop(), TIMEOUT_S)
    delivered = {(m.partition, m.offset): r.value for r, m in zip(flow.by_acks(acks), metadata, strict=True)}
    expected = {
        (p, offset): r.value for p, rs in flow.layout().items() for offset, r in enumerate(rs) if r.acks == acks
    }
    assert delivered == expected
    flow.done.add(f"produce-{acks}")


@pytest.mark.apis("Fetch", "Metadata")
async def test_consume_assigned(broker, flow):
    flow.require("produce-1", "produce-all")
    got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    async with consumer(broker, "none") as c:
        c.assign(partitions(flow))
        for tp in partitions(flow):
            c.seek(tp, 0)
        deadline = time.monotonic() + 15
        while sum(map(len, got.values())) < len(flow.records) and time.monotonic() < deadline:
            batch = await asyncio.wait_for(c.getmany(timeout_ms=500), TIMEOUT_S)
            for tp, records in batch.items():
                got[tp.partition] += [(m.offset, m.key, m.value, m.timestamp, m.timestamp_type) for m in records]
    for p, records in flow.layout().items():
        assert [g[0] for g in got[p]] == list(range(len(records))), f"partition {p} offsets"
        assert [g[2] for g in got[p]] == [r.value for r in records], f"partition {p} values"
        assert [g[1] for g in got[p]] == [r.key for r in records], f"partition {p} keys"
        assert [(g[3], g[4]) for g in got[p]] == [(r.timestamp_ms, 0) for r in records], f"partition {p} timestamps"


@pytest.mark.apis("ListOffsets")
async def test_list_offsets_earliest(broker, flow):
    flow.require("produce-1", "produce-all")
    async with consumer(broker, "none") as c:
        earliest = by_partition(await asyncio.wait_for(c.beginning_offsets(partitions(flow)), TIMEOUT_S))
    assert earliest == {p: 0 for p in range(PARTITIONS)}


@pytest.mark.apis("ListOffsets")
async def test_list_offsets_latest(broker, flow):
    flow.require("produce-1", "produce-all")
    async with consumer(broker, "none") as c:
        latest = by_partition(await asyncio.wait_for(c.end_offsets(partitions(flow)), TIMEOUT_S))
    assert latest == flow.latest()


@pytest.mark.apis("ListOffsets")
async def test_list_offsets_by_time(broker, flow):
    flow.require("produce-1", "produce-all")
    async with consumer(broker, "none") as c:
        mid = by_partition(
            await asyncio.wait_for(c.offsets_for_times({tp: flow.mid_ts_ms for tp in partitions(flow)}), TIMEOUT_S)
        )
        future = by_partition(
            await asyncio.wait_for(c.offsets_for_times({tp: flow.future_ts_ms for tp in partitions(flow)}), TIMEOUT_S)
        )
    assert {p: (o.offset if o else None) for p, o in mid.items()} == {
        p: flow.offset_for_time(p, flow.mid_ts_ms) for p in range(PARTITIONS)
    }
    # No record at or after the timestamp: the broker answers -1 and aiokafka gives None.
    assert future == {p: None for p in range(PARTITIONS)}


@pytest.mark.apis("DeleteRecords", "ListOffsets")
async def test_delete_records(broker, flow):
    flow.require("produce-1", "produce-all")
    tp = TopicPartition(flow.topic, DELETE_PARTITION)
    async with admin_client(broker) as admin:
        result = await asyncio.wait_for(
            admin.delete_records({tp: RecordsToDelete(DELETE_BEFORE)}, timeout_ms=TIMEOUT_MS), TIMEOUT_S
        )
    assert result == {tp: DELETE_BEFORE}
    async with consumer(broker, "none") as c:
        earliest = by_partition(await asyncio.wait_for(c.beginning_offsets(partitions(flow)), TIMEOUT_S))
    assert earliest == {p: DELETE_BEFORE if p == DELETE_PARTITION else 0 for p in range(PARTITIONS)}
    flow.done.add("delete-records")


@pytest.mark.apis("Fetch", "ListOffsets")
async def test_read_below_log_start(broker, flow):
    flow.require("delete-records")
    tp = TopicPartition(flow.topic, DELETE_PARTITION)

    # auto_offset_reset='none': getmany() raises OffsetOutOfRangeError naming the partition and offset.
    async with consumer(broker, "none") as c:
        c.assign([tp])
        c.seek(tp, 0)
        with pytest.raises(OffsetOutOfRangeError) as raised:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                records = await asyncio.wait_for(c.getmany(timeout_ms=500), TIMEOUT_S)
                assert not records, f"read {records} below the log start offset"
    assert raised.value.args[0] == {tp: 0}

    # auto_offset_reset='earliest': the consumer resets to the log start offset.
    async with consumer(broker, "earliest") as c:
        c.assign([tp])
        c.seek(tp, 0)
        first = await asyncio.wait_for(c.getone(), 15)
    assert (first.offset, first.value) == (DELETE_BEFORE, flow.values(DELETE_PARTITION)[DELETE_BEFORE])


@pytest.mark.apis("DescribeConfigs")
async def test_describe_configs(broker, flow):
    flow.require("create")
    async with admin_client(broker) as admin:
        configs = await describe(admin, flow)
    scenario.check_default_topic_configs({n: e["config_value"] for n, e in configs.items()},
                                         {n: e["config_source"] for n, e in configs.items()})


@pytest.mark.apis("AlterConfigs", "DescribeConfigs")
async def test_alter_configs(broker, flow):
    flow.require("create")
    async with admin_client(broker) as admin:
        (response,) = await asyncio.wait_for(
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, flow.topic, {ALTER_KEY: ALTER_VALUE})]),
            TIMEOUT_S,
        )
        (resource,) = response.to_object()["resources"]
        assert (resource["error_code"], resource["resource_name"]) == (0, flow.topic), resource
        entry = (await describe(admin, flow))[ALTER_KEY]
    assert (entry["config_value"], entry["config_source"]) == (ALTER_VALUE, SOURCE_DYNAMIC_TOPIC)


@pytest.mark.apis("DeleteTopics", "Metadata")
async def test_delete_topic(broker, flow):
    flow.require("create")
    async with admin_client(broker) as admin:
        response = await asyncio.wait_for(admin.delete_topics([flow.topic], timeout_ms=TIMEOUT_MS), TIMEOUT_S)
        assert [(t["topic"], t["error_code"]) for t in response.to_object()["topic_error_codes"]] == [(flow.topic, 0)]
        deadline = time.monotonic() + 10
        while flow.topic in (topics := await asyncio.wait_for(admin.list_topics(), TIMEOUT_S)):
            assert time.monotonic() < deadline, f"{flow.topic} still listed: {topics}"
            await asyncio.sleep(0.2)
