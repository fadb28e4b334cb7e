"""The logs of one log dir: loading and recovery at startup, the per-dir checkpoint files, topic
deletion, and the background tasks (retention, checkpoints, time-based flush).

Per-dir files: the three offset checkpoints (dir_checkpoints.py) and `.kafka_cleanshutdown`, whose
presence at startup lets recovery skip the scan. The periodic jobs run in periodic.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from broker.aio import KeyedLocks
from broker.log import checkpoint, open_files
from broker.log.cleaner_manager import LogCleaner
from broker.log.common import (
    InconsistentTopicIdError,
    LogError,
    StorageError,
    TopicPartition,
    delete_dir_name,
)
from broker.log.config import LogConfig, LogManagerConfig
from broker.log.dir_checkpoints import DirCheckpoints
from broker.log.dir_health import DirHealth
from broker.log.dir_state import DirState, read_dir_state
from broker.log.free_space import DirSpace
from broker.log.io import LogIO
from broker.log.loader import LoadReport
from broker.log.log import PartitionLog
from broker.log.log_state import Clock, wall_clock_ms
from broker.log.opening import create_partition_log, load_partition_log
from broker.log.periodic import PeriodicJobs
from broker.log.retention import cause_of_next_deletion
from broker.log.segment_file import OPEN_SEGMENTS
from broker.log.unloaded import UnloadedPartitions
from broker.resolve_generation import RESOLVE_GENERATION

logger = structlog.get_logger(__name__)

class LogManager:
    def __init__(
        self,
        log_dir: Path | str,
        *,
        config: LogManagerConfig | None = None,
        default_log_config: LogConfig | None = None,
        topic_configs: Mapping[str, LogConfig] | None = None,
        clock: Clock = wall_clock_ms,
        executor: Executor | None = None,
        reserve_topics: frozenset[str] = frozenset(),
    ) -> None:
        """`reserve_topics` (the internal ones: group offsets) keep being written below the dir's
        free-space threshold, where client topics are refused."""
        self.log_dir = Path(log_dir)
        self.config = config or LogManagerConfig()
        self.default_log_config = default_log_config or LogConfig()
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.clock = clock
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(
            max_workers=self.config.io_threads, thread_name_prefix="ebb-log-io"
        )
        self.space = DirSpace(self.log_dir, min_free_bytes=self.config.min_free_bytes,
                              min_free_percent=self.config.min_free_percent,
                              check_interval_ms=self.config.free_space_check_interval_ms,
                              run=lambda fn: self._io.run(fn))
        self.space.listeners.append(self._space_changed)
        self._reserve_topics = reserve_topics
        self._io = self._new_io()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._unloaded = UnloadedPartitions()
        self.health = DirHealth(self.log_dir, probe_interval_ms=self.config.failure_probe_interval_ms,
                                run=lambda fn: self._io.run(fn), reload=self._reload_offline)
        # Partitions reloaded while the dir still counts as failed: their logs are served (and their
        # listeners told) once it is healthy again, first of the dir's listeners.
        self._reloaded_while_failed: list[TopicPartition] = []
        self.health.listeners.append(self._health_changed)
        # Creating a topic's logs is one at a time per topic; other topics' creations go on meanwhile.
        self._create_locks = KeyedLocks()
        self._jobs = PeriodicJobs()
        self._started = False
        self.load_reports: dict[TopicPartition, LoadReport] = {}
        self.had_clean_shutdown = False
        self.new_log_dir = False  # no log manager had run in it: neither a clean nor an unclean stop before
        # Called with a partition whose log start offset retention moved (the replicas tell followers).
        self.retention_listeners: list[Callable[[TopicPartition], None]] = []
        # Called with a partition loaded again after it was offline (a new PartitionLog object).
        self.reload_listeners: list[Callable[[TopicPartition], None]] = []
        # Told (cause, records, bytes) after each retention deletion, for the metrics.
        self.deletion_listeners: list[Callable[[str, int, int], None]] = []

        self.checkpoints = DirCheckpoints(self.log_dir, self._io, self._logs, self._unloaded,
                                          sync_start_offsets=self.config.start_offset_checkpoint_sync)
        self.cleaner = LogCleaner(self.log_dir, lambda: self._logs, self.config, self._io, clock)

    # --- access ----------------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_log_config)

    def forget_topic(self, topic: str) -> None:
        """The topic is deleted: its config goes too (else one is kept per topic ever created, for the
        process's life)."""
        self.topic_configs.pop(topic, None)

    def get_log(self, tp: TopicPartition) -> PartitionLog | None:
        """The partition's log, None if this dir has none; KAFKA_STORAGE_ERROR if it is offline."""
        if tp in self._unloaded:
            raise StorageError(f"{tp} is offline: {self._unloaded.entries[tp].reason}")
        if self.health.failed:
            raise StorageError(f"{tp} is offline: log dir {self.log_dir} failed: {self.health.failed_reason}")
        log = self._logs.get(tp)
        if log is not None and log.offline:
            raise StorageError(f"{tp} is offline: {log.offline_reason}")
        return log

    @property
    def logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._logs)

    @property
    def offline_partitions(self) -> dict[TopicPartition, str]:
        found = self._unloaded.reasons
        found.update({tp: log.offline_reason for tp, log in self._logs.items() if log.offline_reason})
        return found

    def _new_io(self) -> LogIO:
        return LogIO(self._executor, urgent=lambda: self.space.low)

    def _space_changed(self, low: bool) -> None:
        """Short of space: deletions still waiting out file.delete.delay.ms run now."""
        if low:
            hurried = self._io.hurry() + sum(log.io.hurry() for log in self._logs.values())
            if hurried:
                logger.info("deleting files now, not after file.delete.delay.ms: the log dir is low", count=hurried)
        elif self._unloaded.reloadable:
            self.health.retry(now=True)  # partitions that could not load for want of space

    async def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await self._io.run(functools.partial(fn, *args, **kwargs))

    # --- startup ---------------------------------------------------------------------------------

    async def startup(self, *, background_tasks: bool = True) -> None:
        """Load every partition (recovering after an unclean stop), finish leftover deletions,
        rewrite the checkpoints, then start the background tasks."""
        await self._run(self.log_dir.mkdir, parents=True, exist_ok=True)
        await self.space.check()
        state: DirState = await self._run(read_dir_state, self.log_dir)
        clean = state.clean_shutdown
        starts, recovery, hws = state.log_start_offsets, state.recovery_points, state.high_watermarks
        OPEN_SEGMENTS.resize(open_files.segment_budget(self.config.open_segments_max))
        self.had_clean_shutdown = clean
        self.new_log_dir = state.never_started
        if state.delete_dirs:
            logger.info("finishing deletion of partition dirs", count=len(state.delete_dirs))
            await asyncio.gather(*(self._io.remove_tree(d) for d in state.delete_dirs), return_exceptions=True)

        async def load(tp: TopicPartition, directory: Path) -> None:
            try:
                log, report = await self._run(
                    load_partition_log,
                    directory,
                    self.config_for(tp.topic),
                    io=self._new_io(),
                    clock=self.clock,
                    log_start_offset=starts.get(tp),
                    recovery_point=recovery.get(tp, 0),
                    high_watermark=hws.get(tp),
                    clean=clean,
                )
            except (OSError, LogError, ValueError) as exc:
                self._unloaded.failed(tp, exc, starts.get(tp), recovery.get(tp), hws.get(tp))
                return
            self._register(tp, log)
            self.load_reports[tp] = report
            if report.problems or report.truncated_bytes:
                logger.warning(
                    "recovered partition",
                    partition=str(tp),
                    problems=report.problems,
                    truncated_bytes=report.truncated_bytes,
                    recovered=report.recovered_segments,
                )

        await asyncio.gather(*(load(tp, d) for tp, d in state.partition_dirs))
        logger.info(
            "loaded logs",
            log_dir=str(self.log_dir),
            partitions=len(self._logs),
            offline=len(self._unloaded),
            **self.previous_stop(),
        )
        # From here on a crash must look unclean; and the checkpoints now match what was loaded.
        await self._run(checkpoint.remove_clean_shutdown, self.log_dir)
        try:
            await self.checkpoint_all()
        except StorageError as exc:
            # A full disk must not keep the broker down: the files on disk still describe what was
            # loaded (or less: an older recovery point only means a longer scan), and the periodic
            # writes retry.
            logger.warning("checkpoints not rewritten at start-up", error=exc.message)
        self._started = True
        if self._unloaded.reloadable:
            self.health.retry()
        await self.cleaner.startup(workers=background_tasks)
        if background_tasks:
            self._start_background_tasks()

    async def _reload_offline(self) -> bool:
        """Load again, with recovery from their recovery points, the partitions an I/O error or a
        failed load took offline (the health probe found the dir writable); True when none is left."""
        for tp, old in [(tp, log) for tp, log in self._logs.items() if log.offline]:
            # The old object's files may belong to a filesystem that is gone: closed, never flushed
            # (a close that reports the dead disk's error changes nothing).
            old.io.cancel_all()
            with contextlib.suppress(OSError):
                old.abandon()
            del self._logs[tp]
            RESOLVE_GENERATION.bump()
            self._unloaded.failed(tp, OSError(old.offline_reason), old.log_start_offset, old.recovery_point,
                                  old.high_watermark, quiet=True)
        for tp in self._unloaded.reloadable:
            carried = self._unloaded.entries[tp].offsets
            try:
                log, report = await self._run(
                    load_partition_log, self.log_dir / tp.dir_name, self.config_for(tp.topic),
                    io=self._new_io(), clock=self.clock, log_start_offset=carried.get("start"),
                    recovery_point=carried.get("recovery", 0), high_watermark=carried.get("hw"), clean=False)
            except (OSError, LogError, ValueError) as exc:
                self._unloaded.failed(tp, exc, carried.get("start"), carried.get("recovery"), carried.get("hw"))
                continue
            self._unloaded.pop(tp)
            self._register(tp, log)
            self.load_reports[tp] = report
            logger.warning("partition loaded again after being offline", partition=str(tp),
                           log_end_offset=log.log_end_offset, truncated_bytes=report.truncated_bytes)
            if self.health.failed:  # get_log still refuses it: its replica takes its role once the dir is back
                self._reloaded_while_failed.append(tp)
            else:
                self._tell_reloaded(tp)
        return not self._unloaded.reloadable

    def _health_changed(self, failed: bool) -> None:
        reloaded, self._reloaded_while_failed = self._reloaded_while_failed, []
        if failed:  # failed again before it was back: they are reloaded (and listed) again
            return
        for tp in reloaded:
            if tp in self._logs:  # not taken offline again meanwhile
                self._tell_reloaded(tp)

    def _tell_reloaded(self, tp: TopicPartition) -> None:
        for listener in self.reload_listeners:
            listener(tp)

    def previous_stop(self) -> dict[str, bool]:
        """How the log dir was left, for start-up log lines: a new dir had no stop to speak of."""
        return {"new_log_dir": True} if self.new_log_dir else {"clean_shutdown": self.had_clean_shutdown}

    def _register(self, tp: TopicPartition, log: PartitionLog) -> None:
        log.start_offset_sink = self.checkpoints.commit_start_offsets
        log.space = self.space
        log.writes_into_reserve = tp.topic in self._reserve_topics
        log.on_offline = self._on_offline
        self._logs[tp] = log
        RESOLVE_GENERATION.bump()
        log.erasure.resume()  # bytes a stop left below the start (erasure.max.delay.ms)

    def _on_offline(self, log: PartitionLog) -> None:
        """An I/O error (not a full disk) on one partition: the whole dir goes offline, as in Kafka."""
        reason = f"{log.topic_partition}: {log.offline_reason}"
        if self.health.fail(reason):
            for other in self._logs.values():
                other.mark_offline(f"log dir failed ({reason})")

    async def checkpoint_all(self) -> None:
        await self.checkpoints.write_all()

    # --- creating and deleting -------------------------------------------------------------------

    async def get_or_create_log(
        self, tp: TopicPartition, *, topic_id: uuid.UUID | None = None, config: LogConfig | None = None
    ) -> PartitionLog:
        """The partition's log, created empty if missing. A directory holding another topic id is a
        stale leftover of a deleted topic: INCONSISTENT_TOPIC_ID (delete it first)."""
        async with self._create_locks.held(tp.topic):
            log = self.get_log(tp)
            if log is not None:
                if topic_id is not None and log.topic_id is not None and log.topic_id != topic_id:
                    raise InconsistentTopicIdError(
                        f"{tp}: directory holds topic id {checkpoint.topic_id_to_str(log.topic_id)}, "
                        f"not {checkpoint.topic_id_to_str(topic_id)}"
                    )
                if topic_id is not None and log.topic_id is None:
                    await self._run(
                        checkpoint.write_partition_metadata,
                        log.directory / checkpoint.PARTITION_METADATA,
                        topic_id,
                    )
                    log.topic_id = topic_id
                if config is not None:
                    log.config = config
                return log
            if config is not None:
                self.topic_configs[tp.topic] = config
            try:
                log = await self._run(
                    create_partition_log,
                    self.log_dir / tp.dir_name,
                    self.config_for(tp.topic),
                    io=self._new_io(),
                    clock=self.clock,
                    topic_id=topic_id,
                )
            except OSError as exc:
                raise StorageError(f"cannot create {tp}: {exc!r}") from exc
            self._register(tp, log)
            logger.info(
                "created log", partition=str(tp), topic_id=topic_id and checkpoint.topic_id_to_str(topic_id)
            )
            return log

    async def get_or_create_logs(self, tps: list[TopicPartition], *, topic_id: uuid.UUID | None,
                                 config: LogConfig | None) -> None:
        """get_or_create_log for many partitions of one topic; the new ones are written without an fsync
        each and made durable together by one syncfs (10,000 partitions: one sync, not 40,000)."""
        if len({tp.topic for tp in tps}) > 1:
            raise ValueError("get_or_create_logs takes the partitions of one topic")
        missing = [tp for tp in tps if self.get_log(tp) is None]
        for tp in set(tps).difference(missing):  # existing logs: topic id and config checked one by one
            await self.get_or_create_log(tp, topic_id=topic_id, config=config)
        if not missing:
            return
        async with self._create_locks.held(missing[0].topic):
            missing = [tp for tp in missing if self.get_log(tp) is None]
            if config is not None:
                for tp in missing:
                    self.topic_configs[tp.topic] = config

            def create_all() -> list[PartitionLog]:
                created = [create_partition_log(self.log_dir / tp.dir_name, self.config_for(tp.topic),
                                               io=self._new_io(), clock=self.clock, topic_id=topic_id,
                                               durable=False) for tp in missing]
                checkpoint.sync_filesystem(self.log_dir)
                return created

            try:
                logs = await self._run(create_all)
            except OSError as exc:
                raise StorageError(f"cannot create the logs of {missing[0].topic}: {exc!r}") from exc
            for tp, log in zip(missing, logs, strict=True):
                self._register(tp, log)
            logger.info("created logs", topic=missing[0].topic, partitions=len(missing),
                        topic_id=topic_id and checkpoint.topic_id_to_str(topic_id))

    async def delete_log(self, tp: TopicPartition) -> bool:
        """Topic deletion for one partition: the directory is renamed
        `<topic>-<partition>.<uuid>-delete` (durably) and dropped from the checkpoints now, and
        removed after file.delete.delay.ms (or by the next startup). False if there was no log."""
        # The cleaner lets go first: a round running on this log is abandoned at its swap.
        self.cleaner.forget(tp)
        log = self._logs.pop(tp, None)
        RESOLVE_GENERATION.bump()
        unloaded = self._unloaded.pop(tp)
        directory = self.log_dir / tp.dir_name
        if log is None and unloaded is None:
            return False
        target = self.log_dir / delete_dir_name(tp, uuid.uuid4().hex)
        files = []
        if log is not None:
            log.start_offset_sink = None
            log.erasure.stop()  # no rewrite may touch the directory once it is renamed:
            await log.io.drain()  # a running copy halts, and its pass ends once it has
            files = [s.file for s in log.segments]
        # Held across the rename and given their new paths after it: a read still being answered
        # from the deleted log may open a parked file again until file.delete.delay.ms ends.
        for file in files:
            file.pin()
        try:
            await self._run(os.rename, directory, target)
            for file in files:
                file.path = target / file.path.name
        except FileNotFoundError:
            pass
        except OSError as exc:
            # Not renamed: the log stays here as it was, for the retry of the topic's deletion.
            if log is not None:
                self._register(tp, log)
            if unloaded is not None:
                self._unloaded.put_back(tp, unloaded)
            raise StorageError(f"cannot rename {directory.name} for deletion: {exc!r}") from exc
        finally:
            for file in files:
                file.unpin()
        try:
            await self._run(checkpoint.fsync_dir, self.log_dir)
        except OSError as exc:  # renamed all the same; a crash before the next sync may undo it: restart finishes
            logger.warning("rename for deletion not synced", directory=target.name, error=repr(exc))
        logger.info("scheduled partition for deletion", partition=str(tp), directory=target.name)
        config = log.config if log is not None else self.config_for(tp.topic)
        # Under erasure.max.delay.ms a delete whose rewrite had not run yet must not outlive the bound in the
        # renamed directory (a replica moved away, a topic deleted): removed at once, as erasure's retired files.
        delay = 0 if config.erasure_enabled else config.file_delete_delay_ms
        self._io.delete_later(delay, files, lambda: self._io.remove_tree(target))
        # The durable rename is the deletion; the checkpoints forgetting the partition can wait for
        # the next write that works (a stale entry names a directory that is gone, and is ignored).
        try:
            await self.checkpoint_all()
        except StorageError:
            pass  # the checkpoint file logged it
        return True

    # --- background work ------------------------------------------------------------------------

    def _start_background_tasks(self) -> None:
        cfg, files = self.config, self.checkpoints
        self.space.start()
        self._jobs.start("retention", cfg.initial_task_delay_ms, cfg.retention_check_interval_ms, self.run_retention)
        self._jobs.start("recovery-point-checkpoint", cfg.initial_task_delay_ms,
                         cfg.recovery_point_checkpoint_interval_ms, files.recovery_points.write)
        self._jobs.start("high-watermark-checkpoint", cfg.high_watermark_checkpoint_interval_ms,
                         cfg.high_watermark_checkpoint_interval_ms, files.high_watermarks.write)
        self._jobs.start("flush", cfg.initial_task_delay_ms, cfg.flush_scheduler_interval_ms, self.flush_due_logs)
        if not cfg.start_offset_checkpoint_sync:
            self._jobs.start("log-start-offset-checkpoint", cfg.initial_task_delay_ms,
                             cfg.start_offset_checkpoint_interval_ms, files.start_offsets.write)

    async def run_retention(self, now_ms: int | None = None) -> int:
        """One retention pass over every log; returns the segments deleted."""
        total = 0
        for log in list(self._logs.values()):
            try:
                total += await self.apply_retention(log, now_ms)
            except LogError as exc:
                logger.error("retention failed", partition=str(log.topic_partition), error=exc.message)
        return total

    async def apply_retention(self, log: PartitionLog, now_ms: int | None = None) -> int:
        """One retention pass over one log (the periodic pass, or a retention config change); the
        deletion and retention listeners hear of what it deleted. Returns the segments deleted."""
        before, size_before = log.log_start_offset, log.size_bytes
        cause = None if log.offline else cause_of_next_deletion(log, now_ms)
        try:
            return await log.delete_old_segments(now_ms)
        finally:
            if cause is not None:
                for deleted in self.deletion_listeners:
                    deleted(cause, log.log_start_offset - before, size_before - log.size_bytes)
            if log.log_start_offset != before:
                for listener in self.retention_listeners:
                    listener(log.topic_partition)

    async def flush_due_logs(self) -> None:
        for log in list(self._logs.values()):
            try:
                await log.maybe_flush_on_time()
            except LogError as exc:
                logger.error("flush failed", partition=str(log.topic_partition), error=exc.message)

    # --- shutdown --------------------------------------------------------------------------------

    async def _stop_tasks(self) -> None:
        await self.space.stop()
        await self.health.stop()
        await self._jobs.stop()

    async def shutdown(self) -> None:
        """Clean shutdown: flush every log, write every checkpoint, then the clean-shutdown marker
        (only if every partition closed cleanly, since the marker lets the next start skip recovery)."""
        await self._stop_tasks()
        await self.cleaner.shutdown()
        await asyncio.gather(*(log.close() for log in self._logs.values()))
        clean = not self.offline_partitions
        try:
            await self.checkpoint_all()
            await self.checkpoints.drain()
            await self._io.drain()
            if clean:
                await self._run(checkpoint.write_clean_shutdown, self.log_dir)
        except StorageError as exc:
            logger.error("log dir shutdown incomplete", log_dir=str(self.log_dir), error=exc.message)
        finally:
            logger.info("log manager shut down", log_dir=str(self.log_dir), clean=clean)
            self._close_executor(wait=True)

    def abandon(self) -> None:
        """Drop everything without flushing or writing checkpoints and the marker: the state a crash
        leaves (minus the page cache). For tests and benchmarks."""
        self.space.cancel()
        self.health.cancel()
        self._jobs.cancel()
        self.cleaner.abandon()
        for log in self._logs.values():
            log.io.cancel_all()
            log.abandon()
        self._io.cancel_all()
        self._close_executor(wait=True)

    def _close_executor(self, *, wait: bool) -> None:
        if self._own_executor and isinstance(self._executor, ThreadPoolExecutor):
            self._executor.shutdown(wait=wait)
