"""Bad options and impossible requests fail with a message that names the problem.

A few go through Spark to show what a user sees; the rest of the option checks call the source's own
parsing and planning directly (the same code Spark runs in its workers), which takes milliseconds
instead of a Python worker start per failure.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from pyspark.errors import PySparkException
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from pipeline.config import ReadConfig, WriteConfig
from pipeline.options import EbbSourceError
from pipeline.planning import plan_batch
from tests.pipeline.helpers import consume_all, create_topic, produce, read_batch, read_options
from tests.support.broker_process import free_port


@pytest.fixture(scope="module")
def topic(bootstrap) -> str:
    create_topic(bootstrap, "err-topic", partitions=2)
    produce(bootstrap, {("err-topic", p): [b"x"] for p in range(2)})
    return "err-topic"


def fails_with(message: str, action) -> None:
    with pytest.raises(PySparkException, match=re.escape(message)):
        action()


def test_missing_bootstrap_servers(spark):
    fails_with("option 'kafka.bootstrap.servers' is required",
               lambda: spark.read.format("ebb").option("subscribe", "t").load().collect())


def test_unreachable_bootstrap_server(spark):
    fails_with("no bootstrap server reachable", lambda: read_batch(spark, f"127.0.0.1:{free_port()}",
                                                                   subscribe="t").collect())


def test_unknown_topic(spark, bootstrap, topic):
    fails_with("topic 'no-such-topic' does not exist", lambda: read_batch(spark, bootstrap,
                                                                         subscribe=f"{topic},no-such-topic").collect())
    fails_with("option 'assign' names partitions that do not exist: err-topic-5",
               lambda: read_batch(spark, bootstrap, assign='{"err-topic": [0, 5]}').collect())


@pytest.mark.parametrize(("options", "message"), [
    ({"startingOffsets": '{"err-topic": [1, 2]}'}, "topic 'err-topic' needs an object of partition: offset"),
    ({"startingOffsets": '{"err-topic": {"0": "one"}}'}, "partitions are numbers >= 0, offsets are >= 0"),
    ({"startingOffsets": '{"err-topic": {"0": 0}}'}, "must give an offset for every partition read (-2 earliest, "
                                                     "-1 latest). Missing: err-topic-1"),
    ({"startingOffsets": "latest"}, "option 'startingOffsets' cannot be latest (-1) in a batch query"),
    ({"endingOffsets": '{"err-topic": {"0": -2, "1": -1}}'}, "option 'endingOffsets' cannot be earliest"),
    ({"startingOffsets": '{"err-topic": {"0": 1, "1": 0}}', "endingOffsets": '{"err-topic": {"0": 0, "1": 1}}'},
     "err-topic-0: startingOffsets 1 is after endingOffsets 0"),
    ({"failOnDataLoss": "maybe"}, "option 'failOnDataLoss' must be true or false, not 'maybe'"),
    ({"assign": '{"err-topic": [0]}'}, "give exactly one of the options subscribe, subscribePattern, assign "
                                       "(got subscribe, assign)"),
    ({"maxOffsetsPerTrigger": "10"}, "option 'maxOffsetsPerTrigger' is for streaming queries"),
])
def test_bad_read_options(bootstrap, topic, options, message):
    with pytest.raises(EbbSourceError, match=re.escape(message)):
        config = ReadConfig.from_options(read_options(bootstrap, subscribe=topic, **options), streaming=False)
        asyncio.run(plan_batch(config))


def test_malformed_starting_offsets(spark, bootstrap, topic):
    fails_with("option 'startingOffsets' must be \"earliest\", \"latest\" or JSON like",
               lambda: read_batch(spark, bootstrap, subscribe=topic, startingOffsets='{"err-topic": {"0": 1').collect())


def test_stream_refuses_ending_offsets(spark, bootstrap, topic):
    query = (spark.readStream.format("ebb").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .option("endingOffsets", "latest").load().writeStream.format("noop").start())
    try:
        fails_with("option 'endingOffsets' is for batch queries", lambda: query.awaitTermination(60))
    finally:
        query.stop()


def write(spark, bootstrap, rows, schema, mode="append", **options):
    (spark.createDataFrame(rows, schema).write.format("ebb").mode(mode)
     .option("kafka.bootstrap.servers", bootstrap).options(**options).save())


@pytest.mark.parametrize(("rows", "schema", "options", "message"), [
    ([("k",)], "key string", {"topic": "err-topic"}, "the rows to write need a 'value' column"),
    ([("v",)], "value string", {"topic": "no-such-topic"}, "topic 'no-such-topic' does not exist"),
    ([("v", 7)], "value string, partition int", {"topic": "err-topic"},
     "a row names partition 7 of 'err-topic', which has 2 partitions"),
])
def test_bad_writes(spark, bootstrap, topic, rows, schema, options, message):
    fails_with(message, lambda: write(spark, bootstrap, rows, schema, **options))


@pytest.mark.parametrize(("columns", "options", "message"), [
    ({"value": IntegerType()}, {"topic": "err-topic"}, "column 'value' must be binary or string, not int"),
    ({"value": StringType()}, {}, "name the topic to write to"),
    ({"value": StringType(), "topic": IntegerType()}, {}, "column 'topic' must be string, not int"),
    ({"value": StringType()}, {"topic": "err-topic", "kafka.acks": "2"}, "option 'kafka.acks' must be all"),
])
def test_bad_write_options(bootstrap, columns, options, message):
    schema = StructType([StructField(name, data_type) for name, data_type in columns.items()])
    with pytest.raises(EbbSourceError, match=re.escape(message)):
        WriteConfig.from_options(read_options(bootstrap, **options), schema)


def test_overwrite_is_refused(spark, bootstrap, topic):
    fails_with("save mode overwrite is not supported",
               lambda: write(spark, bootstrap, [("v",)], "value string", mode="overwrite", topic=topic))


def test_a_refused_batch_fails_the_task_with_the_brokers_error(spark, bootstrap):
    """The fast writer's batches (pipeline/_recordenc.c) refused by the broker: the task fails naming the
    partition and Kafka's error, and nothing of the refused batch is in the log."""
    create_topic(bootstrap, "err-too-large", configs={"max.message.bytes": "2000"})
    fails_with("producing to Ebb failed: err-too-large-0: MESSAGE_TOO_LARGE",
               lambda: write(spark, bootstrap, [("x" * 5000,)], "value string", topic="err-too-large"))
    assert consume_all(bootstrap, "err-too-large") == []
