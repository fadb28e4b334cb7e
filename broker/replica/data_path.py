"""The data path's part of ReplicaManager (as ProducerTable is Partition's): every write to a
partition and every move of a log start offset that someone waits for, as in Kafka's
ReplicaManager. Its rules are written here and in Partition only:

`append_records` (Produce, the group coordinator's records, the transaction coordinator's state and
markers: min.insync.replicas, acks, the wait for the ISR), `delete_records` (DeleteRecords, the
committed-offset trimmer: move every start offset, make them durable with one checkpoint write, wait
for the low watermark) and `make_start_offsets_durable` (the follower's fetcher too). Callers map the
per-partition results (outcomes.py) to their own answers; the waits are delayed.py's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog

from broker.log import LogError, StartOffsetReason, TopicPartition
from broker.log.common import UnnamedAppendError
from broker.metrics.data_path import DataPathCounters
from broker.purgatory import Purgatory
from broker.replica.delayed import await_acks, await_low_watermarks
from broker.replica.outcomes import (
    VALID_ACKS,
    Appended,
    AppendEntry,
    AppendOrigin,
    AppendResult,
    DeleteOutcome,
    append_failure,
)
from broker.replica.partition import Partition, PartitionError
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.topic import Topic

log = structlog.get_logger("replica")


class TopicLookup(Protocol):
    """The topics by name (broker/topics.py's TopicManager)."""

    def get(self, name: str) -> Topic | None: ...


class DataPath(ABC):
    """ReplicaManager's data path part. What it uses of the manager is declared here: the topics,
    the partitions led here, the purgatories the waits park in, the traffic counters, and the event
    that wakes whoever waits on a moved log start offset."""

    _topics: TopicLookup
    produces: Purgatory
    deletions: Purgatory
    counters: DataPathCounters

    @abstractmethod
    def partition(self, topic: str, index: int) -> Partition:
        """The partition led here, or PartitionError."""

    @abstractmethod
    def partition_of(self, topic: Topic, index: int) -> Partition:
        """The partition of a topic already looked up, led here, or PartitionError."""

    @abstractmethod
    def log_start_offset_moved(self, partition: Partition) -> None:
        """Wake the fetches and DeleteRecords parked on this partition's log start offset."""

    async def append_records(self, entries: Sequence[AppendEntry], required_acks: int, timeout_ms: int,
                             origin: AppendOrigin, internal_topics_allowed: bool = False,
                             verification_guards: Mapping[tuple[str, int], object] | None = None,
                             marker_transaction_version: int = 0, *, appended: Appended | None = None
                             ) -> list[AppendResult]:
        """Kafka's ReplicaManager.appendRecords: each batch appended on its partition, led here; one
        result per entry, in order, its `error_code` NONE or why not. acks=-1 returns once the ISR
        holds every batch, or after `timeout_ms` (REQUEST_TIMED_OUT: written here, maybe not
        replicated); the batches stay in the log either way, as in Kafka. `verification_guards`: the
        KIP-890 guards of batches verified with their coordinator (broker/txn/verification.py);
        `marker_transaction_version`: the transaction version of the markers appended (WriteTxnMarkers v2);
        `appended`: told each batch written here, before the acks wait."""
        if required_acks not in VALID_ACKS:
            message = f"acks must be 0, 1 or -1, not {required_acks}"
            return [self._refused(name, index, ErrorCode.INVALID_REQUIRED_ACKS, message, origin)
                    for name, index, _, _ in entries]
        topics = self._topics
        counters = self.counters if origin is AppendOrigin.CLIENT else None
        results: list[AppendResult] = []
        waiting: list[tuple[int, Partition, int]] = []  # (position in results, partition, offset the ISR must reach)
        for name, index, records, batch in entries:
            partition = None
            try:
                topic = topics.get(name)
                if topic is None:
                    raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
                if topic.internal and not internal_topics_allowed:
                    raise PartitionError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {name}")
                partition = self.partition_of(topic, index)
                guard = verification_guards.get((name, index)) if verification_guards else None
                # told as soon as the batch is in the log (a flush may be awaited after)
                written = None if appended is None else partial(appended, len(results))
                result = await partition.append_records_as_leader(records, batch, required_acks, origin, guard,
                                                                  marker_transaction_version, written)
            except (PartitionError, LogError) as exc:
                results.append(self._refused(name, index, exc.error_code, exc.message, origin, partition,
                                             tuple(getattr(exc, "record_errors", ())),
                                             plain=isinstance(exc, UnnamedAppendError)))
                continue
            if counters is not None and not result.duplicate:
                counters.produced(name, len(records), result.last_offset - result.base_offset + 1)
            if required_acks == -1:
                waiting.append((len(results), partition, result.last_offset + 1))
            results.append(result)
        if waiting:
            outcomes = [partition.acks_outcome(required) for _, partition, required in waiting]
            if outcomes.count(ErrorCode.NONE) != len(outcomes):  # on one broker never: the HW moved with the append
                await await_acks(self.produces, results, waiting, outcomes, timeout_ms)
        return results

    def _refused(self, name: str, index: int, code: ErrorCode, message: str, origin: AppendOrigin,
                 partition: Partition | None = None, record_errors: tuple[tuple[int, str], ...] = (),
                 plain: bool = False) -> AppendResult:
        log.info("append refused", partition=f"{name}-{index}", origin=origin.value, error=ErrorCode(code).name,
                 reason=message)
        return append_failure(code, message, partition, record_errors, plain)

    async def delete_records(self, offsets: Mapping[TopicPartition, int], timeout_ms: int, leader_only: bool,
                             reason: StartOffsetReason = StartOffsetReason.CLIENT_RECORD_DELETION
                             ) -> dict[TopicPartition, DeleteOutcome]:
        """Kafka's ReplicaManager.deleteRecords: every partition's log start offset moves first (in
        memory), then one checkpoint write makes them all durable, then the request waits in the
        delete-records purgatory until each low watermark reaches its offset, up to `timeout_ms`
        (partitions still short: REQUEST_TIMED_OUT with the low watermark they had before the wait).
        `leader_only` (KIP-1343) answers once the leader's start is durable, written even when
        `log.start.offset.checkpoint.sync` is off, without waiting for followers."""
        outcomes: dict[TopicPartition, DeleteOutcome] = {}
        started: list[tuple[TopicPartition, Partition, int]] = []
        for tp, offset in offsets.items():
            try:
                topic = self._topics.get(tp.topic)
                if topic is not None and topic.internal:
                    raise PartitionError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                         f"cannot delete records of internal topic {tp.topic}")
                partition = self.partition(tp.topic, tp.partition)
                required, _ = partition.delete_records_on_leader(offset, reason)
            except (PartitionError, LogError) as exc:
                outcomes[tp] = self._deletion_refused(tp, offset, exc)
                continue
            started.append((tp, partition, required))
        failed = await self.make_start_offsets_durable([p for _, p, _ in started], force=leader_only)
        pending: list[tuple[TopicPartition, Partition, int]] = []
        for tp, partition, required in started:
            if partition in failed:
                outcomes[tp] = self._deletion_refused(tp, offsets[tp], failed[partition])
                continue
            low = partition.low_watermark()
            outcomes[tp] = DeleteOutcome(ErrorCode.NONE, low, partition.log_start_offset)
            if not leader_only and low < required:
                pending.append((tp, partition, required))
        if pending:
            await await_low_watermarks(self.deletions, outcomes, pending, timeout_ms)
        return outcomes

    def _deletion_refused(self, tp: TopicPartition, offset: int, exc: PartitionError | LogError) -> DeleteOutcome:
        log.info("delete records refused", partition=str(tp), offset=offset, error=ErrorCode(exc.error_code).name,
                 reason=exc.message)
        return DeleteOutcome(ErrorCode(exc.error_code), -1, -1, exc.message)

    async def make_start_offsets_durable(self, partitions: Iterable[Partition], force: bool = False
                                         ) -> dict[Partition, LogError]:
        """Each partition's log start offset on disk (moved in memory before: the first wait writes the
        checkpoint with all of them), then whatever waits on it looks again. `force`: written even
        when `log.start.offset.checkpoint.sync` is off. Returns the partitions that failed."""
        failed: dict[Partition, LogError] = {}
        for partition in partitions:
            try:
                await partition.log.make_start_offset_durable(force)
            except LogError as exc:
                failed[partition] = exc
                continue
            self.log_start_offset_moved(partition)
        return failed
