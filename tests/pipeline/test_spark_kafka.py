"""Spark's own Kafka connector (format("kafka"), spark-sql-kafka-0-10 4.2.0 from Maven Central) against
Ebb: batch writes and reads, failOnDataLoss after DeleteRecords as the connector defines it (batch and
a restarted stream), and a stream whose progress GroupCommitListener commits to a group, which
retention.committed.groups trims behind. Data is prepared and checked through the project's client."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import StreamingQueryException

from pipeline.connector_commits import GroupCommitListener
from tests.pipeline.helpers import consume_all, create_topic, delete_records, produce
from tests.pipeline.test_loop import group_offsets, log_starts
from tests.pipeline.test_stream import finish
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)


def kafka_read(spark, bootstrap: str, **options):
    return spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).options(**options).load()


def offsets_of(df) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_the_connector_writes_and_reads(spark, bootstrap):
    create_topic(bootstrap, "sk-rw", partitions=2)
    rows = [(f"k{i % 7}", f"v{i}") for i in range(300)]
    (spark.createDataFrame(rows, "key string, value string").write.format("kafka")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", "sk-rw").save())

    stored = consume_all(bootstrap, "sk-rw")
    assert sorted(r.value.decode() for r in stored) == sorted(v for _, v in rows)
    by_key = {}
    for record in stored:  # the connector's default partitioner keeps a key in one partition
        by_key.setdefault(record.key, set()).add(record.partition)
    assert all(len(parts) == 1 for parts in by_key.values())

    read = kafka_read(spark, bootstrap, subscribe="sk-rw").collect()
    assert sorted((r.partition, r.offset, bytes(r.value)) for r in read) == \
        sorted((r.partition, r.offset, r.value) for r in stored)


def test_data_loss_after_delete_records(spark, bootstrap):
    create_topic(bootstrap, "sk-lost")
    produce(bootstrap, {("sk-lost", 0): [b"r%d" % i for i in range(10)]})
    delete_records(bootstrap, {("sk-lost", 0): 6})
    starting = '{"sk-lost": {"0": 2}}'
    assert offsets_of(kafka_read(spark, bootstrap, subscribe="sk-lost")) == [(0, o) for o in range(6, 10)]
    with pytest.raises(Py4JJavaError, match=r"Some data may have been lost(.|\n)*Could not read records in offset "
                                            r"\[2, 10\) for topic partition sk-lost-0"):
        kafka_read(spark, bootstrap, subscribe="sk-lost", startingOffsets=starting).collect()
    skipped = kafka_read(spark, bootstrap, subscribe="sk-lost", startingOffsets=starting, failOnDataLoss="false")
    assert offsets_of(skipped) == [(0, o) for o in range(6, 10)]


def test_a_stream_committed_by_the_listener_is_trimmed_behind(spark, bootstrap, tmp_path):
    create_topic(bootstrap, "sk-mid", partitions=2, configs={"retention.committed.groups": "sk-stage2"})
    listener = GroupCommitListener("sk-stage2", {"kafka.bootstrap.servers": bootstrap}, query_name="sk-stage2")
    other = GroupCommitListener("sk-other", {"kafka.bootstrap.servers": bootstrap}, query_name="not-this-one")
    spark.streams.addListener(listener)
    spark.streams.addListener(other)
    try:
        for round_ in range(2):
            produce(bootstrap, {("sk-mid", p): [b"%d-%d-%d" % (round_, p, i) for i in range(20)] for p in range(2)})
            seen: list[int] = []
            query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                     .option("subscribe", "sk-mid").option("startingOffsets", "earliest")
                     .option("maxOffsetsPerTrigger", "15").load()
                     .writeStream.queryName("sk-stage2")
                     .foreachBatch(lambda df, _, seen=seen: seen.append(df.count()))
                     .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
            finish(query)
            assert sum(seen) == 40  # each round reads only what is new
            ends = {0: 20 * (round_ + 1), 1: 20 * (round_ + 1)}
            # the last AvailableNow batch is committed too (progress is reported on the listener bus)
            wait_for(lambda e=ends: group_offsets(bootstrap, "sk-stage2", "sk-mid", 2) == e,
                     what=f"the group at {ends}")
            wait_for(lambda e=ends: log_starts(bootstrap, "sk-mid", 2) == e, what=f"the log start trimmed to {ends}")
        assert group_offsets(bootstrap, "sk-other", "sk-mid", 2) == {}
    finally:
        spark.streams.removeListener(listener)
        spark.streams.removeListener(other)


def test_the_listener_commits_an_ebb_stream_stopped_right_after_a_batch(spark, bootstrap, tmp_path):
    """format("ebb") commits a batch at the next trigger; with a long trigger interval and a stop after
    the first batch only the listener has committed it."""
    create_topic(bootstrap, "sk-ebb")
    produce(bootstrap, {("sk-ebb", 0): [b"e%d" % i for i in range(12)]})
    listener = GroupCommitListener("sk-ebb-stage", {"kafka.bootstrap.servers": bootstrap})
    spark.streams.addListener(listener)
    try:
        query = (spark.readStream.format("ebb").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", "sk-ebb").option("startingOffsets", "earliest").load()
                 .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp"))
                 .trigger(processingTime="1 hour").start())
        try:
            wait_for(lambda: group_offsets(bootstrap, "sk-ebb-stage", "sk-ebb", 1) == {0: 12},
                     what="the first batch committed by the listener", timeout_s=60)
        finally:
            query.stop()
    finally:
        spark.streams.removeListener(listener)


def test_a_stream_restarted_after_its_next_records_were_deleted(spark, bootstrap, tmp_path):
    """The connector's streaming failOnDataLoss: the checkpoint's next offset is below the log start."""
    create_topic(bootstrap, "sk-gap")
    produce(bootstrap, {("sk-gap", 0): [b"a%d" % i for i in range(4)]})

    def run(checkpoint, **options) -> list[int]:
        seen: list[int] = []
        query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", "sk-gap").option("startingOffsets", "earliest").options(**options).load()
                 .writeStream.foreachBatch(lambda df, _: seen.extend(r.offset for r in df.collect()))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        finish(query)
        return sorted(seen)

    assert run(tmp_path / "strict") == [0, 1, 2, 3]
    assert run(tmp_path / "lenient") == [0, 1, 2, 3]
    produce(bootstrap, {("sk-gap", 0): [b"b%d" % i for i in range(6)]})
    delete_records(bootstrap, {("sk-gap", 0): 7})  # offsets 4-6 go before either query read them
    with pytest.raises(StreamingQueryException, match="Some data may have been lost"):
        run(tmp_path / "strict")
    assert run(tmp_path / "lenient", failOnDataLoss="false") == [7, 8, 9]
