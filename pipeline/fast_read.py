"""Executor side, the fast path: read one offset range with librdkafka into Arrow record batches.

Decoding records one by one in Python (pipeline/transfer.py's reader) tops out near 90k records/s per
task, and Spark then converts each row tuple to Arrow in Python too. Here librdkafka (confluent-kafka, a
well-kept native client) fetches and decodes the batches, and each column is handed to Arrow as one
list, so Spark receives ready record batches.

Anything unusual — an error from librdkafka (offsets out of range after a delete, an unknown
partition), the log ending before the range does, no progress for a while — hands the rest of the range
to the careful reader in transfer.py, which implements failOnDataLoss and its messages. The fast path
only ever reads records the broker hands out in order, so both paths give the same rows.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
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

from .config import ReadConfig
from .options import EARLIEST
from .planning import OffsetRange
from .transfer import read_range

BATCH_ROWS = 10_000
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


class _Columns:
    def __init__(self, r: OffsetRange, schema: pa.Schema, include_headers: bool):
        self.r, self.schema, self.include_headers = r, schema, include_headers
        self.clear()

    def clear(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.offsets: list[int] = []
        self.times: list[int] = []
        self.types: list[int] = []
        self.headers: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, messages: list, offsets: list[int], include_headers: bool) -> None:
        self.keys += [m.key() for m in messages]
        self.values += [m.value() for m in messages]
        self.offsets += offsets
        stamps = [m.timestamp() for m in messages]
        self.times += [t for _, t in stamps]
        self.types += [kind - 1 for kind, _ in stamps]  # librdkafka: 1 CreateTime, 2 LogAppendTime; Kafka: 0, 1
        if include_headers:
            self.headers += [m.headers() or [] for m in messages]

    def batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        micros = pc.multiply(pa.array(self.times, pa.int64()), 1000)
        arrays = [pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
                  pa.array([self.r.topic] * n, pa.string()), pa.array([self.r.partition] * n, pa.int32()),
                  pa.array(self.offsets, pa.int64()), micros.cast(self.schema.field("timestamp").type),
                  pa.array(self.types, pa.int32())]
        if self.include_headers:
            arrays.append(pa.array(self.headers, self.schema.field("headers").type))
        self.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def read_batches(config: ReadConfig, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    schema = arrow_schema(config.include_headers)
    columns = _Columns(r, schema, config.include_headers)
    # librdkafka wants a group id even for assigned partitions; this one never joins or commits
    consumer = Consumer({"bootstrap.servers": config.bootstrap, "client.id": config.client["client_id"],
                         "group.id": "ebb-spark-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "error", "enable.partition.eof": True,
                         "fetch.queue.backoff.ms": 10, "log_level": 3, **config.security.librdkafka()})
    position = None if r.start == EARLIEST else r.start  # None: the log start, not known yet
    handed_over = False
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, OFFSET_BEGINNING if position is None else position)])
        last_progress = time.monotonic()
        while position is None or position < r.end:
            messages = consumer.consume(BATCH_ROWS, 0.5)
            if not messages and time.monotonic() - last_progress > QUIET_S:
                handed_over = True
                break
            if messages:
                last_progress = time.monotonic()
            # column by column, in comprehensions: cheaper than a Python loop with appends per record
            errors = [i for i, message in enumerate(messages) if message.error() is not None]
            good = messages[:errors[0]] if errors else messages
            offsets = [message.offset() for message in good]
            cut = bisect.bisect_left(offsets, r.end)  # offsets ascend; missing ones (compaction) end the range too
            if cut < len(offsets):
                good, offsets = good[:cut], offsets[:cut]
                position = r.end
            elif errors:  # the log's end, a refused offset...: the careful reader judges
                handed_over = True
            if good:
                columns.add(good, offsets, config.include_headers)
                if position != r.end:
                    position = offsets[-1] + 1
            if handed_over:
                break
            if len(columns) >= BATCH_ROWS:
                yield columns.batch()
    finally:
        consumer.close()
    if len(columns):
        yield columns.batch()
    if handed_over:
        rest = OffsetRange(r.topic, r.partition, EARLIEST if position is None else position, r.end)
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
