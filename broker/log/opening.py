"""Making a PartitionLog from disk: a new, empty partition directory, or an existing one loaded
(and recovered after an unclean stop), and what a log dir holds at start-up. All block on the disk:
the LogManager calls them from its pool."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import structlog

from broker.log import checkpoint
from broker.log.cold_files import unlink_all
from broker.log.common import TMP_SUFFIX, CorruptCheckpointError, TopicPartition, is_delete_dir
from broker.log.config import LogConfig
from broker.log.io import LogIO
from broker.log.loader import LoadReport, load_partition
from broker.log.log import Clock, PartitionLog, wall_clock_ms
from broker.log.segment import LogSegment

logger = structlog.get_logger(__name__)
Offsets = dict[TopicPartition, int]


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
                                max_index_bytes=config.segment_index_bytes, now_ms=clock())
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


def read_dir_state(
    log_dir: Path,
) -> tuple[bool, Offsets, Offsets, Offsets, list[tuple[TopicPartition, Path]], list[Path]]:
    """What a log dir holds at start-up: the clean-shutdown marker, the three per-dir checkpoints
    (a damaged one reads as empty), the partition directories and the `-delete` ones still to
    remove. A `.tmp` left by an interrupted atomic write is removed."""
    try:
        clean = checkpoint.read_clean_shutdown(log_dir)
    except CorruptCheckpointError as exc:
        logger.warning("clean shutdown marker unreadable; recovering as after a crash", error=str(exc))
        clean = False
    offsets: list[Offsets] = []
    for name in (
        checkpoint.LOG_START_OFFSET_CHECKPOINT,
        checkpoint.RECOVERY_POINT_CHECKPOINT,
        checkpoint.REPLICATION_OFFSET_CHECKPOINT,
    ):
        try:
            found = checkpoint.read_offsets(log_dir / name)
        except (CorruptCheckpointError, OSError) as exc:
            logger.warning("checkpoint damaged; rebuilding it from the segments", file=name, error=str(exc))
            found = None
            if name == checkpoint.RECOVERY_POINT_CHECKPOINT:
                clean = False  # without recovery points, trust nothing
        offsets.append(found or {})
    partitions: list[tuple[TopicPartition, Path]] = []
    deleting: list[Path] = []
    for entry in sorted(os.listdir(log_dir)):
        path = log_dir / entry
        if entry.endswith(TMP_SUFFIX) and path.is_file():
            unlink_all([path])
        elif is_delete_dir(entry) and path.is_dir():
            deleting.append(path)
        elif path.is_dir():
            tp = TopicPartition.from_dir_name(entry)
            if tp is not None:
                partitions.append((tp, path))
    return clean, offsets[0], offsets[1], offsets[2], partitions, deleting
