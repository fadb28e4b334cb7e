"""The careful reader: one offset range as rows through the project's client, with failOnDataLoss.

pipeline/fast_read.py hands it whatever librdkafka cannot settle (offsets deleted under the read, a log
that ends before the range). It runs inside a Spark Python worker with its own event loop
(asyncio.Runner) and connections, opened and closed within the call, and fetches a round at a time,
so a large range never sits in memory whole. Also here: the driver's check that a target topic exists.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from client import Admin, Consumer, ConsumerRecord, OffsetOutOfRangeError, TopicPartition

from .config import ReadConfig, WriteConfig, cluster_options
from .options import EARLIEST, EbbSourceError
from .planning import OffsetRange, data_loss, quiet_client_logs

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FETCH_WAIT_MS = 100
STALL_TIMEOUT_S = 120.0  # no progress for this long inside a range the broker said exists: give up


def to_row(record: ConsumerRecord, include_headers: bool) -> tuple:
    row = (record.key, record.value, record.topic, record.partition, record.offset,
           _EPOCH + timedelta(milliseconds=record.timestamp), record.timestamp_type)
    return row + (list(record.headers),) if include_headers else row


def read_range(config: ReadConfig, r: OffsetRange) -> Iterator[tuple]:
    quiet_client_logs()
    tp = TopicPartition(r.topic, r.partition)
    with asyncio.Runner() as runner:
        consumer = Consumer(config.bootstrap, max_wait_ms=FETCH_WAIT_MS, isolation_level=config.isolation_level,
                            **cluster_options(config))
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
                elif consumer.end_offset(tp, r.end) <= position:
                    data_loss(config, f"{tp}: offsets {position} to {r.end - 1} are gone: "
                                      f"the log now ends at {consumer.end_offset(tp)}")
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


async def check_topic_exists(config: WriteConfig) -> None:
    async with Admin(config.bootstrap, **cluster_options(config)) as admin:
        info = (await admin.describe_topics([config.topic]))[config.topic]
    if not info.partitions:
        raise EbbSourceError(f"topic {config.topic!r} does not exist on {config.bootstrap}")
