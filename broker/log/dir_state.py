"""What a log dir holds when the broker starts, read before any partition loads (blocking: run it off
the event loop): how the last stop went, the three per-dir checkpoints, the partition directories,
and the renamed directories of deletions a stop interrupted. Left-over `.tmp` files of a write that
never finished are removed on the way."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import structlog

from broker.log import checkpoint
from broker.log.checkpoint_file import Offsets
from broker.log.cold_files import unlink_all
from broker.log.common import TMP_SUFFIX, CorruptCheckpointError, TopicPartition, is_delete_dir

logger = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class DirState:
    clean_shutdown: bool  # the marker was there and every checkpoint could be trusted
    log_start_offsets: Offsets
    recovery_points: Offsets
    high_watermarks: Offsets
    partition_dirs: list[tuple[TopicPartition, Path]]
    delete_dirs: list[Path]
    never_started: bool  # a brand-new dir: no checkpoints, no marker, nothing in it


def read_dir_state(log_dir: Path) -> DirState:
    try:
        clean = checkpoint.read_clean_shutdown(log_dir)
    except CorruptCheckpointError as exc:
        logger.warning("clean shutdown marker unreadable; recovering as after a crash", error=str(exc))
        clean = False
    offsets: list[Offsets] = []
    recovery_points_absent = False
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
        else:
            if name == checkpoint.RECOVERY_POINT_CHECKPOINT:
                recovery_points_absent = found is None  # written at every start-up
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
    never_started = recovery_points_absent and not clean and not partitions and not deleting
    return DirState(clean, offsets[0], offsets[1], offsets[2], partitions, deleting, never_started)
