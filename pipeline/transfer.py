"""Executor side: read one offset range as rows, and produce rows to topics.

Each runs inside a Spark Python worker with its own event loop (asyncio.Runner) and its own
connections, opened and closed within the call. Reading is a generator that fetches a round at a
time, so a large range never sits in memory whole.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta

from client import Admin, Consumer, ConsumerRecord, OffsetOutOfRangeError, Producer, TopicPartition
from protocol.records import NewRecord

from .config import ReadConfig, WriteConfig
from .options import EARLIEST, EbbSourceError
from .planning import OffsetRange, data_loss, quiet_client_logs

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FETCH_WAIT_MS = 100
STALL_TIMEOUT_S = 120.0  # no progress for this long inside a range the broker said exists: give up
FLUSH_BYTES = 512 * 1024  # keeps each produced batch well under the broker's max.message.bytes
FLUSH_RECORDS = 5000


def to_row(record: ConsumerRecord, include_headers: bool) -> tuple:
    row = (record.key, record.value, record.topic, record.partition, record.offset,
           _EPOCH + timedelta(milliseconds=record.timestamp), record.timestamp_type)
    return row + (list(record.headers),) if include_headers else row


def read_range(config: ReadConfig, r: OffsetRange) -> Iterator[tuple]:
    quiet_client_logs()
    tp = TopicPartition(r.topic, r.partition)
    with asyncio.Runner() as runner:
        consumer = Consumer(config.bootstrap, max_wait_ms=FETCH_WAIT_MS, **config.client)
        runner.run(consumer.start())
        try:
            position = r.start
            if position == EARLIEST:
                position = runner.run(_bounds(consumer, tp))[0]
            consumer.assign({tp: position})
            stalled_since = time.monotonic()
            while position < r.end:
                try:
                    records = runner.run(consumer.fetch())
                except OffsetOutOfRangeError:
                    position = runner.run(_after_out_of_range(config, consumer, tp, position, r.end))
                    consumer.seek(tp, position)
                    continue
                for record in records:
                    if record.offset >= r.end:
                        break
                    yield to_row(record, config.include_headers)
                moved = consumer.position(tp) > position
                position = consumer.position(tp)
                if moved:
                    stalled_since = time.monotonic()
                elif consumer.high_watermarks.get(tp, r.end) <= position:
                    data_loss(config, f"{tp}: offsets {position} to {r.end - 1} are gone: "
                                      f"the log now ends at {consumer.high_watermarks[tp]}")
                    return
                elif time.monotonic() - stalled_since > STALL_TIMEOUT_S:
                    raise EbbSourceError(f"{tp}: no records at offset {position} for {STALL_TIMEOUT_S:g}s")
        finally:
            runner.run(consumer.close())


async def _bounds(consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    admin = Admin(consumer.cluster)
    return (await admin.earliest_offsets([tp]))[tp], (await admin.latest_offsets([tp]))[tp]


async def _after_out_of_range(config: ReadConfig, consumer: Consumer, tp: TopicPartition, position: int,
                              end: int) -> int:
    """Where to go on after the broker refused `position`: the log start, or `end` (nothing left)."""
    log_start, log_end = await _bounds(consumer, tp)
    if position < log_start:
        last = min(log_start, end) - 1
        data_loss(config, f"cannot read {tp} from offset {position}: offsets {position} to {last} were deleted "
                          f"(the log starts at {log_start}, by DeleteRecords or retention) before they were read")
        return min(log_start, end)
    data_loss(config, f"cannot read {tp} from offset {position}: the log ends at {log_end}")
    return end


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (Utils.murmur2) as an unsigned 32-bit value."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length % 4
    if tail:
        rest = data[length - tail:]
        if tail == 3:
            h ^= rest[2] << 16
        if tail >= 2:
            h ^= rest[1] << 8
        h ^= rest[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    return h ^ (h >> 15)


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record, so Java and Python producers agree."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def _as_bytes(value) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)  # Spark hands binary columns over as bytearray


class _RowProducer:
    """Buffers rows per partition and sends them in batches, one Produce per leader per flush."""

    def __init__(self, config: WriteConfig, runner: asyncio.Runner, producer: Producer):
        self.config = config
        self.runner = runner
        self.producer = producer
        self.partition_counts: dict[str, int] = {}
        self.round_robin = itertools.count()
        self.buffer: dict[TopicPartition, list[NewRecord]] = {}
        self.buffered_bytes = 0
        self.buffered_records = 0
        self.written = 0

    def add(self, row) -> None:
        c = self.config
        topic = c.topic or row[c.topic_index]
        if not topic:
            raise EbbSourceError("a row has a null topic and there is no 'topic' option")
        key = _as_bytes(row[c.key_index]) if c.key_index is not None else None
        value = _as_bytes(row[c.value_index])
        headers = []
        if c.headers_index is not None and row[c.headers_index]:
            headers = [(h[0], _as_bytes(h[1])) for h in row[c.headers_index]]
        partition = row[c.partition_index] if c.partition_index is not None else None
        count = self._partition_count(topic)
        if partition is None:
            partition = partition_for_key(key, count) if key is not None else next(self.round_robin) % count
        elif not 0 <= partition < count:
            raise EbbSourceError(f"a row names partition {partition} of {topic!r}, which has {count} partitions")
        self.buffer.setdefault(TopicPartition(topic, partition), []).append(NewRecord(key, value, headers))
        self.buffered_bytes += len(key or b"") + len(value or b"")
        self.buffered_records += 1
        if self.buffered_bytes >= FLUSH_BYTES or self.buffered_records >= FLUSH_RECORDS:
            self.flush()

    def _partition_count(self, topic: str) -> int:
        if topic not in self.partition_counts:
            meta = self.runner.run(self.producer.cluster.refresh_metadata([topic]))
            partitions = meta.topics[topic].partitions
            if not partitions:
                raise EbbSourceError(f"topic {topic!r} does not exist on {self.config.bootstrap}")
            self.partition_counts[topic] = len(partitions)
        return self.partition_counts[topic]

    def flush(self) -> None:
        if not self.buffer:
            return
        results = self.runner.run(self.producer.send_batches(self.buffer))
        failed = {tp: r for tp, r in results.items() if not r.ok}
        if failed:
            detail = "; ".join(f"{tp}: {r.error.name} {r.error_message or ''}".strip() for tp, r in failed.items())
            raise EbbSourceError(f"producing to Ebb failed: {detail}")
        self.written += self.buffered_records
        self.buffer, self.buffered_bytes, self.buffered_records = {}, 0, 0


async def check_topic_exists(config: WriteConfig) -> None:
    async with Admin(config.bootstrap, **config.client) as admin:
        info = (await admin.describe_topics([config.topic]))[config.topic]
    if not info.partitions:
        raise EbbSourceError(f"topic {config.topic!r} does not exist on {config.bootstrap}")


def write_rows(config: WriteConfig, rows: Iterable) -> int:
    """Produce every row; return how many. Raises on the first partition the broker refuses."""
    quiet_client_logs()
    with asyncio.Runner() as runner:
        producer = Producer(config.bootstrap, acks=config.acks, **config.client)
        runner.run(producer.start())
        try:
            writer = _RowProducer(config, runner, producer)
            for row in rows:
                writer.add(row)
            writer.flush()
            return writer.written
        finally:
            runner.run(producer.close())
