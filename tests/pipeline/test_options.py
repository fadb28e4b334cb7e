"""Options: reading from and to a time (ListOffsets by timestamp), and options the source refuses by name."""

from __future__ import annotations

import re

import pytest
from pyspark.errors import PySparkException

from pipeline.config import ReadConfig, WriteConfig
from pipeline.options import EbbSourceError
from tests.pipeline.helpers import create_topic, produce, read_batch, read_options
from tests.pipeline.test_stream import run_collecting, stream


@pytest.fixture(scope="module")
def timed(bootstrap) -> str:
    """Two partitions, each with records at times 1000, 2000 and 3000 (offsets 0, 1, 2)."""
    create_topic(bootstrap, "opt-timed", partitions=2)
    for ts in (1000, 2000, 3000):
        produce(bootstrap, {("opt-timed", p): [f"{p}@{ts}".encode()] for p in range(2)}, timestamp_ms=ts)
    return "opt-timed"


def values(df) -> list[str]:
    return sorted(bytes(r.value).decode() for r in df.collect())


def test_starting_timestamp_for_every_partition(spark, bootstrap, timed):
    assert values(read_batch(spark, bootstrap, subscribe=timed, startingTimestamp=1500)) == [
        "0@2000", "0@3000", "1@2000", "1@3000"]


def test_offsets_by_timestamp_per_partition_and_an_end_by_time(spark, bootstrap, timed):
    df = read_batch(spark, bootstrap, subscribe=timed, startingOffsetsByTimestamp='{"opt-timed": {"0": 0, "1": 2000}}',
                    endingTimestamp=3000)
    assert values(df) == ["0@1000", "0@2000", "1@2000"]
    # an end after every record is the latest offset, as in the Kafka connector
    df = read_batch(spark, bootstrap, subscribe=timed, endingOffsetsByTimestamp='{"opt-timed": {"0": 2500, "1": 9999}}')
    assert values(df) == ["0@1000", "0@2000", "1@1000", "1@2000", "1@3000"]


def test_a_start_after_every_record(spark, bootstrap, timed):
    with pytest.raises(PySparkException, match=re.escape("option 'startingTimestamp': no record of opt-timed-0, "
                                                         "opt-timed-1 has a timestamp at or after")):
        read_batch(spark, bootstrap, subscribe=timed, startingTimestamp=9999).collect()
    df = read_batch(spark, bootstrap, subscribe=timed, startingTimestamp=9999,
                    startingOffsetsByTimestampStrategy="latest")
    assert values(df) == []


def test_a_stream_starting_at_a_time(spark, bootstrap, timed, tmp_path):
    batches, _ = run_collecting(stream(spark, bootstrap, subscribe=timed, startingTimestamp=2500), tmp_path / "cp")
    assert sorted(row for batch in batches for row in batch) == [(0, 2, b"0@3000"), (1, 2, b"1@3000")]


@pytest.mark.parametrize(("options", "message"), [
    ({"kafka.max.poll.records": "5"}, "Kafka client setting 'kafka.max.poll.records' is not supported by the ebb "
                                      "source"),
    ({"fetchOffset.numRetries": "3"}, "option 'fetchOffset.numRetries' is not supported by the ebb source"),
    ({"minOffsetsPerTrigger": "3"}, "option 'minOffsetsPerTrigger' is for streaming queries"),
    ({"kafka.security.protocol": "SASL_SSL"}, "option kafka.sasl.mechanism is not set (Kafka's default is GSSAPI)"),
    ({"kafka.sasl.mechanism": "PLAIN"}, "option kafka.sasl.mechanism is set but kafka.security.protocol is "
                                        "PLAINTEXT"),
    ({"kafka.ssl.keystore.password": "x"}, "option 'kafka.ssl.keystore.password' is not supported: the security "
                                           "settings understood are kafka.sasl.jaas.config"),
    ({"startingTimestamp": "soon"}, "option 'startingTimestamp' must be a time in milliseconds"),
    ({"startingTimestamp": "5", "startingOffsets": "earliest"}, "give only one of the options startingOffsets, "
                                                                "startingOffsetsByTimestamp, startingTimestamp"),
    ({"startingOffsetsByTimestamp": '{"t": {"0": -1}}'}, "option 'startingOffsetsByTimestamp' must be JSON like"),
    ({"startingOffsetsByTimestampStrategy": "maybe"}, "must be error or latest"),
    ({"kafka.group.id": "g"}, "option 'kafka.group.id' is for streaming queries"),
    ({"kafka.isolation.level": "READ_COMMITTED"}, "option 'kafka.isolation.level' must be read_uncommitted or "
                                                  "read_committed, not 'READ_COMMITTED'"),
])
def test_refused_read_options(bootstrap, options, message):
    with pytest.raises(EbbSourceError, match=re.escape(message)):
        ReadConfig.from_options(read_options(bootstrap, subscribe="t", **options), streaming=False)


def test_plaintext_is_accepted(bootstrap):
    config = ReadConfig.from_options(read_options(bootstrap, subscribe="t", **{"kafka.security.protocol": "plaintext"}),
                                     streaming=True)
    assert config.selection.topics == ("t",)


def test_refused_write_option(bootstrap):
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField("value", StringType())])
    with pytest.raises(EbbSourceError, match=re.escape("Kafka client setting 'kafka.linger.ms' is not supported by "
                                                       "the ebb sink")):
        WriteConfig.from_options(read_options(bootstrap, topic="t", **{"kafka.linger.ms": "5"}), schema)


def test_a_missing_topic_fails_before_the_computation(spark, bootstrap):
    from pyspark.sql import functions as F

    def explode(value):
        raise RuntimeError("the computation ran")

    df = spark.range(3).select(F.udf(explode, "string")("id").alias("value"))
    with pytest.raises(PySparkException, match="topic 'opt-nowhere' does not exist") as caught:
        df.write.format("ebb").mode("append").option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", "opt-nowhere").save()
    assert "the computation ran" not in str(caught.value)
