"""A partition's producer table and how it is rebuilt from its log (a part of replica/partition.py's
Partition). A follower rebuilds it lazily, off the event loop, while batches keep arriving, its role
may change and its log may be truncated: the rebuild goes on to the log end before the table counts
as loaded (nothing awaited after its last look), and every reset (role change, truncation) bumps a
generation so that a rebuild begun before is cancelled and discarded."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from pathlib import Path

import structlog

from broker.log import PartitionLog, StorageError, TopicPartition
from broker.log.txn_index import fsync_files
from broker.replica.outcomes import PartitionError
from broker.replica.producer_recovery import RunIO, rebuild_producer_state, remove_snapshot_beyond
from broker.replica.producer_state import SNAPSHOT_VERSION, ProducerStateManager
from protocol.errors import ErrorCode

log = structlog.get_logger("replica")


class ProducerTable(ABC):
    """Partition's producer table part: `producers` (the table), whether it is loaded, its rebuild
    and its snapshot."""

    topic_partition: TopicPartition
    log: PartitionLog

    def _init_producers(self, directory: Path) -> None:
        self.producers = ProducerStateManager(directory)
        self.producers_loaded = False
        self._producers_loading: asyncio.Future[None] | None = None
        # Bumped by every reset of the table (role change, truncation): a rebuild begun before is discarded.
        self._producers_generation = 0

    @abstractmethod
    def _producer_io(self) -> RunIO:
        """How blocking work runs (the partition's host's pool)."""

    @abstractmethod
    def producer_id_expiration_ms(self) -> int:
        """`producer.id.expiration.ms` in force now (the partition's host follows dynamic changes)."""

    def expire_producers(self) -> int:
        """Forget the producers idle past the expiration in force; returns how many."""
        return self.producers.expire(self.producer_id_expiration_ms())

    async def load_producer_state(self) -> None:
        """Rebuild the producer table (snapshot, then the batch headers after it) unless it is loaded.
        Every leader append waits for it, so no batch is checked against a partial table. Concurrent
        callers share one load; a reset meanwhile (role change, truncation) discards it and the
        callers wait for the next; after a failure the next caller tries again."""
        while not self.producers_loaded:
            if self._producers_loading is None or self._producers_loading.done():
                self._producers_loading = asyncio.ensure_future(self._load_producers(self._producers_generation))
            loading = self._producers_loading
            try:
                await asyncio.shield(loading)
            except asyncio.CancelledError:
                if not loading.cancelled():
                    raise  # this caller was cancelled, not the load
            except (OSError, StorageError) as exc:  # StorageError: indexing a replayed abort failed
                raise PartitionError(ErrorCode.KAFKA_STORAGE_ERROR,
                                     f"{self.topic_partition}: cannot load producer state: {exc!r}") from exc
            finally:
                if loading.done() and self._producers_loading is loading:
                    self._producers_loading = None

    async def _load_producers(self, generation: int) -> None:
        fresh = ProducerStateManager(self.log.directory)
        # It returns caught up with the log end, with nothing awaited since it last looked: a follower's
        # append after that sees the table loaded and applies its batches itself.
        await rebuild_producer_state(self.log, fresh, self._producer_io(), self.producer_id_expiration_ms())
        if generation == self._producers_generation:
            self.producers = fresh
            self.producers_loaded = True

    def reset_producers(self) -> None:
        """Forget the table (rebuilt from the log when needed) and any rebuild under way."""
        self._producers_generation += 1
        self.producers.clear()
        self.producers_loaded = False
        loading, self._producers_loading = self._producers_loading, None
        if loading is not None and not loading.done():
            loading.cancel()

    def producer_snapshot(self) -> tuple[bytes, int] | None:
        """Snapshot bytes and the offset they cover, if the table changed since the last one."""
        if not self.producers_loaded or not self.producers.dirty:
            return None
        offset = self.log.log_end_offset
        return self.producers.snapshot(offset), offset

    async def write_producer_snapshot(self) -> bool:
        taken = self.producer_snapshot()
        if taken is None:
            return False
        data, offset = taken
        generation = self._producers_generation
        self.producers.dirty = False
        index_files = self.log.aborted_txns.take_unsynced()
        try:
            # The aborts below the snapshot's offset are not replayed at load: their index goes first.
            await self._producer_io()(fsync_files, index_files)
            await self.log.io.write_atomically(self.producers.snapshot_path, data)
            if generation != self._producers_generation:  # truncated meanwhile: it may cover lost batches
                await self._producer_io()(remove_snapshot_beyond, self.producers.snapshot_path, -1)
                return False
            self.producers.snapshot_offset = offset
        except OSError as exc:
            self.producers.dirty = True
            self.log.aborted_txns.still_unsynced(index_files)
            log.error("cannot write producer state snapshot", partition=str(self.topic_partition), error=repr(exc))
            return False
        log.debug("wrote producer state snapshot", partition=str(self.topic_partition), offset=offset,
                  version=SNAPSHOT_VERSION)
        return True

    # A follower's truncations go through these (Kafka's truncateAndReload, truncateFullyAndStartAt). The
    # table is reset first: truncate_to may wait for the start offset checkpoint, and a snapshot written
    # then must not hold the cut batches at the new log end.

    async def truncate_log_to(self, offset: int) -> None:
        """Cut the log at `offset` (diverged from the leader, or past its end) with the table."""
        self.reset_producers()
        await self.log.truncate_to(offset)
        await self._producer_io()(remove_snapshot_beyond, self.producers.snapshot_path, offset)

    async def restart_log_at(self, offset: int) -> None:
        """Drop the whole log and start it empty at `offset` (behind the leader's start), with the table."""
        self.reset_producers()
        await self.log.truncate_fully_and_start_at(offset)
        await self._producer_io()(remove_snapshot_beyond, self.producers.snapshot_path, -1)
