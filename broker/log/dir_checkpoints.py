"""The three offset checkpoint files of one log dir (Kafka's names and formats):
`log-start-offset-checkpoint`, `recovery-point-offset-checkpoint` and `replication-offset-checkpoint`.

Each holds one offset per partition: the loaded logs' own, and for the partitions not loaded (offline)
the entries they had, so that a failed load forgets nothing. The log start offset checkpoint is
group-committed (checkpoint_file.py): every caller waits for a write that began after its change, and
all callers that arrive while one write runs share the next one. With
`log.start.offset.checkpoint.sync=false` it is written every
`log.flush.start.offset.checkpoint.interval.ms` instead, as Kafka does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path

from broker.log import checkpoint
from broker.log.checkpoint_file import CheckpointFile, Offsets, nothing_more
from broker.log.common import TopicPartition
from broker.log.io import LogIO
from broker.log.log import PartitionLog
from broker.log.unloaded import UnloadedPartitions


class DirCheckpoints:
    def __init__(self, log_dir: Path, io: LogIO, logs: Mapping[TopicPartition, PartitionLog],
                 unloaded: UnloadedPartitions, *, sync_start_offsets: bool) -> None:
        """`logs` and `unloaded` are the log manager's own, read at each write."""
        self._logs = logs
        self._unloaded = unloaded
        self._sync_start_offsets = sync_start_offsets
        self.start_offsets = CheckpointFile(
            log_dir / checkpoint.LOG_START_OFFSET_CHECKPOINT, io, self._start_offset_snapshot
        )
        self.recovery_points = CheckpointFile(
            log_dir / checkpoint.RECOVERY_POINT_CHECKPOINT,
            io,
            lambda: (self._offsets("recovery", lambda log: log.recovery_point), nothing_more),
        )
        self.high_watermarks = CheckpointFile(
            log_dir / checkpoint.REPLICATION_OFFSET_CHECKPOINT,
            io,
            lambda: (self._offsets("hw", lambda log: log.high_watermark), nothing_more),
        )

    def _offsets(self, kind: str, value: Callable[[PartitionLog], int]) -> Offsets:
        result = self._unloaded.offsets(kind)
        for tp, log in self._logs.items():
            result[tp] = value(log)
        return result

    def _start_offset_snapshot(self) -> tuple[Offsets, Callable[[], None]]:
        # Every log is written, not only those whose start is above their first segment (Kafka's
        # filter): a crash that undoes a segment rename must not bring deleted records back.
        taken = [(log, log.log_start_offset) for log in self._logs.values()]
        offsets = self._unloaded.offsets("start")
        offsets.update({log.topic_partition: start for log, start in taken})

        def durable() -> None:
            for log, start in taken:
                log.start_offset_checkpointed(start)

        return offsets, durable

    async def commit_start_offsets(self, force: bool) -> None:
        """A log's start offset sink: written now under `log.start.offset.checkpoint.sync` or when the
        caller forces it (DeleteRecords v3 LeaderOnly), else left to the periodic write."""
        if force or self._sync_start_offsets:
            await self.start_offsets.write()

    async def write_all(self) -> None:
        await asyncio.gather(
            self.start_offsets.write(), self.recovery_points.write(), self.high_watermarks.write()
        )

    async def drain(self) -> None:
        """Until no write of any of the three runs."""
        await asyncio.gather(
            self.start_offsets.drain(), self.recovery_points.drain(), self.high_watermarks.drain()
        )
