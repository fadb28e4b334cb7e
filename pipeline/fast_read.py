"""Executor side, the fast path: read one offset range into Arrow record batches.

Decoding records one by one in Python (pipeline/transfer.py's reader) tops out near 90k records/s per
task, and so does taking librdkafka's message objects apart in Python. Here the project's consumer
fetches (up to PARTITION_FETCH_BYTES a round) and pipeline/record_columns.py turns each round's record
bytes into one Arrow record batch, the per-record work in a small compiled decoder
(pipeline/_recordcols.c), so Spark receives ready record batches.

Anything unusual — offsets out of range after a delete, a malformed answer, the log ending before the
range does, no progress for a while — hands the rest of the range to the careful reader in
transfer.py, which implements failOnDataLoss and its messages. Both read the same batches the same
way, so they give the same rows.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from client import Consumer, TopicPartition
from client.aborted import BatchFilter
from client.errors import KafkaClientError
from protocol.record_format import Buffer

from . import record_columns
from .config import ReadConfig, cluster_options
from .loop_thread import LoopThread
from .planning import OffsetRange, quiet_client_logs
from .transfer import FETCH_WAIT_MS, read_range
from .worker_memory import keep_freed_memory

BATCH_ROWS = 10_000  # rows per Arrow batch on the careful reader's path
PARTITION_FETCH_BYTES = 8 * 2**20
QUIET_S = 10.0  # no records for this long while the range is not done: let the careful reader judge


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects for the source's schema (pyspark's own mapping, so they match)."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return to_arrow_schema(StructType(fields), timezone="UTC")


def read_batches(config: ReadConfig, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    quiet_client_logs()
    keep_freed_memory()
    schema = arrow_schema(config.include_headers)
    tp = TopicPartition(r.topic, r.partition)

    def columns(_tp: TopicPartition, position: int, data: Buffer | None,
                batches: BatchFilter) -> tuple[pa.RecordBatch, int]:
        return record_columns.decode(data, position, r.end, r.topic, r.partition, schema, batches)

    position = r.start  # EARLIEST until the first round looks the log start up
    handed_over = False
    consumer = Consumer(config.bootstrap, max_wait_ms=FETCH_WAIT_MS, partition_max_bytes=PARTITION_FETCH_BYTES,
                        isolation_level=config.isolation_level, **cluster_options(config))
    loop = LoopThread("ebb-read")  # after the consumer, which may refuse its settings
    pending: Future | None = None
    try:
        loop.call(consumer.start())
        consumer.assign({tp: position})
        last_progress = time.monotonic()
        if position < r.end:
            pending = loop.submit(consumer.fetch_decoded(columns))
        while pending is not None:
            try:
                batch = pending.result()[tp]
            except KafkaClientError:  # deleted under us, refused, malformed...: the careful reader judges
                handed_over = True
                break
            pending = None
            moved_to = consumer.position(tp)  # no fetch runs now: the loop thread leaves it alone
            if moved_to > position:
                last_progress = time.monotonic()
            elif (consumer.end_offset(tp, r.end) <= moved_to
                  or time.monotonic() - last_progress > QUIET_S):
                handed_over = True  # the log ends before the range, or nothing comes: the careful reader judges
            position = moved_to
            if not handed_over and position < r.end:
                pending = loop.submit(consumer.fetch_decoded(columns))  # the next round while Spark takes this one
            if batch.num_rows:
                yield batch
    finally:
        if pending is not None:
            pending.cancel()
        try:
            loop.call(consumer.close())
        finally:
            loop.close()
    if handed_over:
        rest = OffsetRange(r.topic, r.partition, position, r.end)
        yield from rows_to_batches(read_range(config, rest), schema)


def rows_to_batches(rows: Iterable[tuple], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    chunk: list[tuple] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= BATCH_ROWS:
            yield _from_rows(chunk, schema)
            chunk = []
    if chunk:
        yield _from_rows(chunk, schema)


def _from_rows(rows: list[tuple], schema: pa.Schema) -> pa.RecordBatch:
    columns = zip(*rows, strict=True)
    return pa.RecordBatch.from_arrays([pa.array(column, field.type) for column, field in zip(columns, schema,
                                                                                               strict=True)],
                                      schema=schema)
