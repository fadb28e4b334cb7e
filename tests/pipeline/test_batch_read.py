"""Batch reads with Spark: schema, every record once, offset ranges, headers, timestamps, topic selection."""

from __future__ import annotations

from datetime import UTC, datetime

from protocol.records import NewRecord
from tests.pipeline.helpers import create_topic, produce, read_batch, rows_by_offset

T0 = 1_700_000_000_000  # a fixed CreateTime, ms


def test_reads_every_record_of_every_partition_with_the_kafka_schema(spark, bootstrap):
    create_topic(bootstrap, "br-all", partitions=3)
    produce(bootstrap, {("br-all", p): [(f"k{p}-{i}".encode(), f"v{p}-{i}".encode()) for i in range(20)]
                        for p in range(3)}, timestamp_ms=T0)
    produce(bootstrap, {("br-all", 1): [b"no-key"]}, timestamp_ms=T0 + 1)
    df = read_batch(spark, bootstrap, subscribe="br-all")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int")]
    expected = [("br-all", p, i, f"k{p}-{i}".encode(), f"v{p}-{i}".encode()) for p in range(3) for i in range(20)]
    expected.append(("br-all", 1, 20, None, b"no-key"))
    assert rows_by_offset(df) == sorted(expected)
    assert df.rdd.getNumPartitions() == 3  # one task per topic-partition
    times = {(r.offset, r.timestampType, r.ts) for r in
             df.where("partition = 1 and offset >= 19").selectExpr("offset", "timestampType",
                                                                    "unix_millis(timestamp) as ts").collect()}
    assert times == {(19, 0, T0), (20, 0, T0 + 1)}


def test_starting_and_ending_offsets_as_json(spark, bootstrap):
    create_topic(bootstrap, "br-range", partitions=2)
    produce(bootstrap, {("br-range", p): [f"{p}-{i}".encode() for i in range(10)] for p in range(2)})
    df = read_batch(spark, bootstrap, subscribe="br-range",
                    startingOffsets='{"br-range": {"0": 3, "1": -2}}',
                    endingOffsets='{"br-range": {"0": 7, "1": -1}}')
    got = [(p, o) for _, p, o, _, _ in rows_by_offset(df)]
    assert got == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(10)]
    empty = read_batch(spark, bootstrap, subscribe="br-range", startingOffsets='{"br-range": {"0": 10, "1": 10}}')
    assert empty.count() == 0


def test_ending_offsets_fix_the_read_even_if_more_arrives(spark, bootstrap):
    create_topic(bootstrap, "br-fixed")
    produce(bootstrap, {("br-fixed", 0): [b"a", b"b", b"c"]})
    df = read_batch(spark, bootstrap, subscribe="br-fixed", endingOffsets='{"br-fixed": {"0": 2}}')
    produce(bootstrap, {("br-fixed", 0): [b"d"]})
    assert [v for *_, v in rows_by_offset(df)] == [b"a", b"b"]


def test_headers_and_log_append_time(spark, bootstrap):
    create_topic(bootstrap, "br-headers", configs={"message.timestamp.type": "LogAppendTime"})
    before = datetime.now(UTC)
    produce(bootstrap, {("br-headers", 0): [NewRecord(b"k", b"v", [("h1", b"x"), ("h2", None)], T0)]})
    without = read_batch(spark, bootstrap, subscribe="br-headers")
    assert "headers" not in without.columns
    row = read_batch(spark, bootstrap, subscribe="br-headers", includeHeaders="true").collect()[0]
    assert [(h.key, h.value and bytes(h.value)) for h in row.headers] == [("h1", b"x"), ("h2", None)]
    assert row.timestampType == 1  # LogAppendTime: the broker's clock, not the producer's T0
    assert row.timestamp.replace(tzinfo=UTC) >= before.replace(microsecond=0)


def test_subscribe_pattern_assign_and_min_partitions(spark, bootstrap):
    for name in ("brp-a", "brp-b", "brq-c"):
        create_topic(bootstrap, name, partitions=2)
        produce(bootstrap, {(name, p): [f"{name}-{p}-{i}".encode() for i in range(6)] for p in range(2)})
    by_pattern = read_batch(spark, bootstrap, subscribePattern="brp-.*")
    assert {(r.topic, r.partition) for r in by_pattern.select("topic", "partition").distinct().collect()} == {
        ("brp-a", 0), ("brp-a", 1), ("brp-b", 0), ("brp-b", 1)}
    assert by_pattern.count() == 24
    assigned = read_batch(spark, bootstrap, assign='{"brq-c": [1], "brp-a": [0]}')
    assert sorted({(t, p) for t, p, *_ in rows_by_offset(assigned)}) == [("brp-a", 0), ("brq-c", 1)]
    split = read_batch(spark, bootstrap, subscribe="brq-c", minPartitions=6)
    assert split.rdd.getNumPartitions() == 6
    assert [(p, o) for _, p, o, _, _ in rows_by_offset(split)] == [(p, o) for p in range(2) for o in range(6)]
