"""Making a PartitionLog from disk: a new, empty partition directory, or an existing one loaded
(and recovered after an unclean stop). Both block on the disk: the LogManager calls them from its pool."""

from __future__ import annotations

import uuid
from pathlib import Path

from broker.log import checkpoint
from broker.log.config import LogConfig
from broker.log.io import LogIO
from broker.log.loader import LoadReport, load_partition
from broker.log.log import PartitionLog
from broker.log.log_state import Clock, wall_clock_ms
from broker.log.segment import LogSegment


def create_partition_log(
    directory: Path,
    config: LogConfig,
    *,
    io: LogIO | None = None,
    clock: Clock = wall_clock_ms,
    topic_id: uuid.UUID | None = None,
    start_offset: int = 0,
    durable: bool = True,
) -> PartitionLog:
    """A new, empty partition directory (partition.metadata is durable before any data).
    `durable=False` skips the fsyncs: the caller makes a whole batch durable at once (`sync_filesystem`)
    before anything is appended."""
    directory.mkdir(parents=True, exist_ok=False)
    if topic_id is not None:
        checkpoint.write_partition_metadata(directory / checkpoint.PARTITION_METADATA, topic_id, sync=durable)
    segment = LogSegment.create(directory, start_offset, index_interval_bytes=config.index_interval_bytes,
                                max_index_bytes=config.index_bytes, now_ms=clock())
    if durable:
        checkpoint.fsync_dir(directory)
        checkpoint.fsync_dir(directory.parent)
    return PartitionLog(
        directory,
        config,
        [segment],
        io=io,
        clock=clock,
        log_start_offset=start_offset,
        recovery_point=start_offset,
        high_watermark=start_offset,
        topic_id=topic_id,
    )


def load_partition_log(
    directory: Path,
    config: LogConfig,
    *,
    io: LogIO | None = None,
    clock: Clock = wall_clock_ms,
    log_start_offset: int | None = None,
    recovery_point: int = 0,
    high_watermark: int | None = None,
    clean: bool = False,
) -> tuple[PartitionLog, LoadReport]:
    """Open a partition directory. After an unclean stop, every segment from the one holding
    `recovery_point` on is validated batch by batch and cut at the first bad batch; any segment whose
    indexes do not check out is rebuilt. The log start offset never moves below `log_start_offset`."""
    loaded = load_partition(
        directory,
        config,
        now_ms=clock(),
        log_start_offset=log_start_offset,
        recovery_point=recovery_point,
        high_watermark=high_watermark,
        clean=clean,
    )
    log = PartitionLog(
        directory,
        config,
        loaded.segments,
        io=io,
        clock=clock,
        log_start_offset=loaded.log_start_offset,
        recovery_point=loaded.log_end_offset,
        high_watermark=loaded.high_watermark,
        epoch_cache=loaded.epoch_cache,
        topic_id=loaded.topic_id,
    )
    return log, loaded.report
