"""The client against a real Ebb broker process: topics, produce/consume, offsets, configs, DeleteRecords,
read_committed over librdkafka's transactions.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Producer as TransactionalProducer

from client import (
    EARLIEST,
    LATEST,
    Admin,
    Consumer,
    KafkaError,
    OffsetOutOfRangeError,
    Producer,
    TopicAlreadyExistsError,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from protocol.enums import ConfigSource
from protocol.errors import ErrorCode
from protocol.records import NewRecord


@pytest.fixture
def bootstrap(ebb_broker) -> str:
    return ebb_broker.bootstrap


async def _filled_topic(admin: Admin, name: str, partitions: int = 1, records: int = 10) -> None:
    await admin.create_topic(name, num_partitions=partitions)
    async with Producer(admin.cluster, acks=-1) as producer:
        await producer.send_batches({(name, p): [f"{name}-{p}-{i}".encode() for i in range(records)]
                                     for p in range(partitions)})


async def test_negotiates_api_versions_v3(bootstrap):
    async with Admin(bootstrap) as admin:
        conn = await admin.cluster.any_connection()
        assert conn.api_versions_version == 3
        assert conn.pick_version(21) == 3  # Ebb serves its DeleteRecords extension


async def test_topics_lifecycle(bootstrap):
    async with Admin(bootstrap) as admin:
        created = await admin.create_topic("life", num_partitions=3, configs={"retention.ms": "3600000"})
        assert created.ok
        with pytest.raises(TopicAlreadyExistsError):
            await admin.create_topic("life")
        assert "life" in await admin.list_topics()
        described = await admin.describe_topics(["life", "missing"])
        assert sorted(described["life"].partitions) == [0, 1, 2]
        assert described["life"].topic_id is not None
        assert described["missing"].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await admin.delete_topic("life")
        assert "life" not in await admin.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin.delete_topic("life")


async def test_produce_and_consume_with_both_acks(bootstrap):
    async with Admin(bootstrap) as admin:
        await admin.create_topic("pc", num_partitions=3)
        sent = {}
        for acks in (1, -1):
            async with Producer(admin.cluster, acks=acks) as producer:
                for p in range(3):
                    values = [f"{acks}-{p}-{i}".encode() for i in range(50)]
                    base = await producer.send("pc", p, [(b"k%d" % i, v) for i, v in enumerate(values)])
                    sent.setdefault(p, []).extend(values)
                    assert base == len(sent[p]) - 50
        consumer = Consumer(admin.cluster)
        consumer.assign({("pc", p): EARLIEST for p in range(3)})
        records = await consumer.read_to_end()
        for p in range(3):
            got = [r for r in records if r.partition == p]
            assert [r.value for r in got] == sent[p]
            assert [r.offset for r in got] == list(range(100))
            assert consumer.high_watermarks[TopicPartition("pc", p)] == 100


async def test_list_offsets_earliest_latest_and_by_time(bootstrap):
    async with Admin(bootstrap) as admin:
        await admin.create_topic("times")
        t0 = int(time.time() * 1000) - 60_000
        async with Producer(admin.cluster) as producer:
            # Out-of-order timestamps inside batches: offsets 0..4 carry t0+0, +10, +5, +20, +15.
            await producer.send("times", 0, [NewRecord(None, b"a", (), t0), NewRecord(None, b"b", (), t0 + 10),
                                             NewRecord(None, b"c", (), t0 + 5)])
            await producer.send("times", 0, [NewRecord(None, b"d", (), t0 + 20), NewRecord(None, b"e", (), t0 + 15)])
        tp = TopicPartition("times", 0)
        assert await admin.earliest_offsets([tp]) == {tp: 0}
        assert await admin.latest_offsets([tp]) == {tp: 5}
        for delta, offset in [(0, 0), (6, 1), (10, 1), (12, 3), (16, 3), (20, 3), (21, -1)]:
            assert (await admin.offsets_for_times({tp: t0 + delta}))[tp] == offset, delta
        unknown = await admin.list_offsets({("times", 4): EARLIEST, ("nope", 0): LATEST})
        assert {r.error for r in unknown.values()} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


@pytest.mark.parametrize("leader_only", [False, True])
async def test_delete_records_moves_the_log_start(bootstrap, leader_only):
    topic = f"del-{int(leader_only)}"
    async with Admin(bootstrap) as admin:
        await _filled_topic(admin, topic, partitions=2)
        deleted = await admin.delete_records({(topic, 0): 4, (topic, 1): -1}, leader_only=leader_only)
        results = deleted.partition_results()
        assert results[(topic, 0)].ok and results[(topic, 0)].low_watermark == 4
        assert results[(topic, 0)].leader_log_start_offset == 4
        assert results[(topic, 1)].ok and results[(topic, 1)].low_watermark == 10  # -1: the high watermark
        assert await admin.earliest_offsets([(topic, 0), (topic, 1)]) == {(topic, 0): 4, (topic, 1): 10}

        consumer = Consumer(admin.cluster)
        consumer.assign({(topic, 0): 0})
        with pytest.raises(OffsetOutOfRangeError) as info:
            await consumer.fetch()
        assert (info.value.topic, info.value.partition, info.value.offset) == (topic, 0, 0)
        assert consumer.position((topic, 0)) == 0  # nothing moved
        consumer.seek((topic, 0), EARLIEST)
        records = await consumer.read_to_end()
        assert [r.offset for r in records] == [4, 5, 6, 7, 8, 9]

        again = (await admin.delete_records({(topic, 0): 2})).partition_results()  # below the log start: a no-op
        assert again[(topic, 0)].ok and again[(topic, 0)].low_watermark == 4


async def test_delete_records_errors_per_partition(bootstrap):
    async with Admin(bootstrap) as admin:
        await _filled_topic(admin, "del-err")
        deleted = await admin.delete_records({("del-err", 0): 11, ("del-err", 3): 1, ("gone", 0): 1})
        results = deleted.partition_results()
    assert results[("del-err", 0)].error == ErrorCode.OFFSET_OUT_OF_RANGE  # above the high watermark
    assert results[("del-err", 3)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[("gone", 0)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_delete_records_on_a_compacted_topic_is_a_policy_violation(bootstrap):
    async with Admin(bootstrap) as admin:
        await admin.create_topic("compacted", configs={"cleanup.policy": "compact"})
        async with Producer(admin.cluster) as producer:
            await producer.send("compacted", 0, [(b"k", b"v")])
        results = (await admin.delete_records({("compacted", 0): 1})).partition_results()
    assert results[("compacted", 0)].error == ErrorCode.POLICY_VIOLATION


async def test_describe_and_alter_configs(bootstrap):
    async with Admin(bootstrap) as admin:
        await admin.create_topic("cfg")
        configs = await admin.describe_configs("cfg")
        assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
        assert configs["cleanup.policy"].value == "delete"
        await admin.alter_configs("cfg", {"retention.ms": "1000"})
        altered = await admin.describe_configs("cfg", ["retention.ms"])
        assert altered["retention.ms"].value == "1000"
        assert altered["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        await admin.alter_configs("cfg", deletes=["retention.ms"])
        assert (await admin.describe_configs("cfg", ["retention.ms"]))["retention.ms"].is_default
        with pytest.raises(KafkaError):
            await admin.alter_configs("cfg", {"retention.ms": "not-a-number"})


async def test_read_committed_stops_at_the_lso_without_aborted_records(bootstrap):
    async with Admin(bootstrap) as admin:
        await admin.create_topic("rc-client", num_partitions=1)
    producer = TransactionalProducer({"bootstrap.servers": bootstrap, "transactional.id": "rc-client"})

    def transactions() -> None:  # committed, aborted, committed, then one left open
        producer.init_transactions(30)
        for values, end in (([b"c0", b"c1"], producer.commit_transaction), ([b"a0"], producer.abort_transaction),
                            ([b"c2"], producer.commit_transaction), ([b"o0"], None)):
            producer.begin_transaction()
            for value in values:
                producer.produce("rc-client", value)
            producer.flush(30)
            if end:
                end(30)

    await asyncio.to_thread(transactions)
    try:
        tp = TopicPartition("rc-client", 0)
        async with Consumer(bootstrap, isolation_level=1) as consumer:
            consumer.assign({tp: EARLIEST})
            assert [r.value for r in await consumer.read_to_end()] == [b"c0", b"c1", b"c2"]
            # after c0 c1 COMMIT a0 ABORT c2 COMMIT: the open transaction's first record
            assert consumer.position(tp) == consumer.end_offset(tp) == 7 < consumer.high_watermarks[tp]
        async with Consumer(bootstrap) as consumer:
            consumer.assign({tp: EARLIEST})
            assert [r.value for r in await consumer.read_to_end()] == [b"c0", b"c1", b"a0", b"c2", b"o0"]
    finally:
        await asyncio.to_thread(producer.abort_transaction, 30)
