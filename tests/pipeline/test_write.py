"""Batch writes with Spark, read back with the project's client; the key partitioner against Kafka's."""

from __future__ import annotations

import pytest
from kafka.partitioner.default import murmur2 as kafka_murmur2

from tests.pipeline.helpers import consume_all, create_topic


def write(df, bootstrap, **options):
    df.write.format("ebb").mode("append").option("kafka.bootstrap.servers", bootstrap).options(**options).save()


def test_keyed_rows_land_where_kafka_would_put_them(spark, bootstrap):
    create_topic(bootstrap, "wr-keys", partitions=3)
    rows = [(f"user-{i % 7}", f"event-{i}") for i in range(40)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(2)
    write(df, bootstrap, topic="wr-keys")
    got = consume_all(bootstrap, "wr-keys")
    assert sorted((r.key, r.value) for r in got) == sorted((k.encode(), v.encode()) for k, v in rows)
    for record in got:  # kafka-python's murmur2, the Java client's hash
        assert record.partition == (kafka_murmur2(record.key) & 0x7FFFFFFF) % 3


def test_topic_and_partition_columns_binary_values_and_headers(spark, bootstrap):
    create_topic(bootstrap, "wr-a", partitions=2)
    create_topic(bootstrap, "wr-b", partitions=2)
    rows = [("wr-a", 1, bytearray(b"\x00\x01"), [("h", bytearray(b"1"))]), ("wr-b", 0, bytearray(b"\xff"), []),
            ("wr-b", 1, None, None)]
    schema = "topic string, partition int, value binary, headers array<struct<key: string, value: binary>>"
    write(spark.createDataFrame(rows, schema), bootstrap)
    a, b = consume_all(bootstrap, "wr-a"), consume_all(bootstrap, "wr-b")
    assert [(r.partition, r.key, r.value, r.headers) for r in a] == [(1, None, b"\x00\x01", [("h", b"1")])]
    assert sorted((r.partition, r.value) for r in b) == [(0, b"\xff"), (1, None)]


def test_unkeyed_rows_spread_over_partitions_and_topic_option_wins(spark, bootstrap):
    create_topic(bootstrap, "wr-spread", partitions=3)
    df = spark.createDataFrame([("elsewhere", f"v{i}") for i in range(30)], "topic string, value string").coalesce(1)
    write(df, bootstrap, topic="wr-spread")
    got = consume_all(bootstrap, "wr-spread")
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(30))
    assert {r.partition for r in got} == {0, 1, 2}


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_compressed_writes(spark, bootstrap, codec):
    topic = f"wr-{codec}"
    create_topic(bootstrap, topic, partitions=2)
    rows = [(f"k{i}", f"value {i} " * 10) for i in range(500)]
    write(spark.createDataFrame(rows, "key string, value string"), bootstrap, topic=topic,
          **{"kafka.compression.type": codec})
    got = consume_all(bootstrap, topic)
    assert sorted((r.key, r.value) for r in got) == sorted((k.encode(), v.encode()) for k, v in rows)
