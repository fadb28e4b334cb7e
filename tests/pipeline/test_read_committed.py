"""kafka.isolation.level=read_committed: librdkafka's transactional producer commits, aborts and leaves one
transaction open; the ebb source (batch, and a stream cut into small micro-batches that end inside aborted
transactions and on markers) reads exactly the committed records up to the last stable offset, as Spark's
own Kafka connector does with the same option (batch and stream); read_uncommitted reads every record
up to the high watermark."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer

from pipeline.config import ReadConfig
from pipeline.planning import plan_batch
from pipeline.transfer import read_range
from tests.pipeline.helpers import create_topic, read_batch, read_options
from tests.pipeline.test_stream import run_collecting, stream

pytestmark = pytest.mark.timeout(300)
TOPIC = "rc-txn"
COMMITTED = [b"c0", b"c1", b"c2", b"c3", b"c4"]
ABORTED = [b"a0", b"a1", b"a2"]
OPEN = [b"o0", b"o1"]


@pytest.fixture(scope="module")
def transactions(bootstrap):
    create_topic(bootstrap, TOPIC, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "rc-txn-writer"})
    producer.init_transactions(30)

    def transaction(values, end):
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(TOPIC, value, partition=i % 2)
        producer.flush(30)  # on the broker before the transaction ends
        if end:
            end(30)

    transaction(COMMITTED[:3], producer.commit_transaction)
    transaction(ABORTED, producer.abort_transaction)
    transaction(COMMITTED[3:], producer.commit_transaction)
    transaction(OPEN, None)  # left open: the last stable offset stays at its first record
    yield
    producer.abort_transaction(30)


def ebb_values(df) -> list[bytes]:
    return sorted(bytes(r.value) for r in df.collect())


def rows(df) -> list[tuple]:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())


def test_read_committed_reads_the_committed_records_up_to_the_lso(spark, bootstrap, transactions):
    committed = read_batch(spark, bootstrap, subscribe=TOPIC, **{"kafka.isolation.level": "read_committed"})
    assert ebb_values(committed) == sorted(COMMITTED)
    everything = read_batch(spark, bootstrap, subscribe=TOPIC)
    assert ebb_values(everything) == sorted(COMMITTED + ABORTED + OPEN)

    def kafka(**options):
        return spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option(
            "subscribe", TOPIC).options(**options).load()

    assert rows(kafka(**{"kafka.isolation.level": "read_committed"})) == rows(committed)
    assert rows(kafka()) == rows(everything)


def test_a_read_committed_stream_in_small_batches(spark, bootstrap, transactions, tmp_path):
    df = stream(spark, bootstrap, subscribe=TOPIC, startingOffsets="earliest", maxOffsetsPerTrigger=1,
                **{"kafka.isolation.level": "read_committed"})
    batches, _ = run_collecting(df, tmp_path / "cp")
    ebb_rows = sorted(row for batch in batches for row in batch)
    assert sorted(value for _, _, value in ebb_rows) == sorted(COMMITTED)
    kafka = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 1)
             .option("kafka.isolation.level", "read_committed").load())
    kafka_batches, _ = run_collecting(kafka, tmp_path / "cp-kafka")
    assert sorted(row for batch in kafka_batches for row in batch) == ebb_rows


def test_the_careful_reader_reads_the_same(bootstrap, transactions):
    """pipeline/transfer.py, which the fast reader hands unusual ranges to, over the client's Consumer."""
    options = read_options(bootstrap, subscribe=TOPIC, **{"kafka.isolation.level": "read_committed"})
    config = ReadConfig.from_options(options, streaming=False)
    ranges = asyncio.run(plan_batch(config))
    assert sorted(row[1] for r in ranges for row in read_range(config, r)) == sorted(COMMITTED)
