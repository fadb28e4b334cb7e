"""One partition as a replica: its log, leadership, watermarks and producer state.

On a single broker every partition is led here: ISR = {this node}, and the high watermark moves to
the log end offset after each append. The rules are written for a replica set anyway, so the cluster
issue extends them rather than replacing them:

    high watermark = min log end offset over the ISR       (followers report theirs in Fetch)
    low watermark  = min log start offset over alive replicas (the leader's own on one broker)

A Partition is bound to one log object and one topic id: the ReplicaManager drops it when either
changes (topic deleted, or deleted and created again), so state never leaks between incarnations.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import structlog

from broker.cluster.partition_state import PartitionState
from broker.log import AppendInfo, PartitionLog, StartOffsetReason, TopicPartition
from broker.log.common import UnnamedAppendError
from broker.log.txn_index import AbortedTxn
from broker.log.validator import needs_validation, validate
from broker.replica.outcomes import AppendOrigin, AppendResult, PartitionError
from broker.replica.producer_recovery import RunIO
from broker.replica.producer_state import (
    BatchMetadata,
    ProducerStateError,
    last_sequence,
)
from broker.replica.producer_table import ProducerTable
from broker.resolve_generation import RESOLVE_GENERATION
from protocol.control_records import read_marker
from protocol.errors import ErrorCode, ProtocolError
from protocol.records import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader, RecordBatch, iter_batches

log = structlog.get_logger("replica")

NO_LEADER_EPOCH = -1


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of a follower from its fetches (-1 until its first fetch)."""

    replica_id: int
    log_end_offset: int = -1
    log_start_offset: int = -1
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0  # when the follower last had everything the leader had (Kafka's rule below)
    last_fetch_leader_log_end_offset: int = -1  # the leader's log end when the previous fetch came
    joining: bool = False  # added by a reassignment and not yet fetching inside the leader's log


def _log_failed_load(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("producer state load for the log cleaner failed", error=repr(task.exception()))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


T = TypeVar("T")


class PartitionHost(Protocol):
    """What a Partition needs from whoever holds it (ReplicaManager): where its events go, who is
    alive, a way to ask for an ISR change, and a thread pool for blocking file work."""

    @property
    def node_id(self) -> int: ...
    @property
    def producer_id_expiration_ms(self) -> int: ...  # in force now: a dynamic broker property

    def leadership_changed(self, partition: Partition) -> None: ...
    def appended(self, partition: Partition) -> None: ...  # and the high watermark stayed: else the next one
    def high_watermark_moved(self, partition: Partition) -> None: ...
    def log_start_offset_moved(self, partition: Partition) -> None: ...
    def records_deleted(self, partition: Partition, reason: StartOffsetReason, records: int, size: int) -> None: ...
    def is_alive(self, broker_id: int) -> bool: ...
    def request_isr_change(self, partition: Partition, isr: set[int]) -> None: ...
    async def run_io(self, fn: Callable[..., T], *args: object) -> T: ...


class Partition(ProducerTable):
    def __init__(self, host: PartitionHost, topic_partition: TopicPartition, topic_id: uuid.UUID,
                 replicas: list[int], log_: PartitionLog, state: PartitionState | None = None) -> None:
        """`state`: the cluster's partition state (leader, leader_epoch, isr); without one (a single
        broker) the partition is led here at the epoch its log was last written under."""
        self.host = host
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.replicas = list(replicas)
        self.log = log_
        self.local_id = host.node_id
        self._init_producers(log_.directory)
        self.followers: dict[int, FollowerState] = {}
        self.leaving: set[int] = set()  # replicas a reassignment is removing
        if state is not None and state.leader != self.local_id:
            self.leader_id = state.leader
            self.leader_epoch = state.leader_epoch
            self.isr: set[int] = set(state.isr)
            return
        self.leader_id = self.local_id
        if state is not None:
            self.leader_epoch = state.leader_epoch
            self.isr = set(state.isr) | {self.local_id}
        else:
            self.leader_epoch = max(0, log_.epoch_cache.latest_epoch)
            self.isr = {self.local_id}
        self.followers = self._fresh_followers()
        self._note_leader_epoch()
        # Becoming leader: the high watermark catches up with the ISR at once (after an unclean stop
        # the checkpointed one can lag the log end offset).
        self.maybe_increment_high_watermark()

    def __repr__(self) -> str:
        return f"Partition({self.topic_partition}, epoch={self.leader_epoch}, log={self.log!r})"

    def _producer_io(self) -> RunIO:
        return self.host.run_io

    def producer_id_expiration_ms(self) -> int:
        return self.host.producer_id_expiration_ms

    # --- leadership ------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    def make_leader(self, leader_epoch: int, isr: set[int]) -> None:
        """Become (or stay) leader at `leader_epoch` (the cluster's partition state says so)."""
        was_follower = not self.is_leader
        if was_follower or leader_epoch != self.leader_epoch:
            # A new term: what followers reported to an earlier one does not count.
            self.followers = self._fresh_followers()
        if was_follower:
            # Batches appended as a follower never went through the producer table: rebuild it from
            # the log before the first produce is checked against it.
            self.reset_producers()
        self.leader_id = self.local_id
        self.leader_epoch = leader_epoch
        RESOLVE_GENERATION.bump()  # a cached Fetch resolve checked the old term
        self.isr = set(isr) | {self.local_id}
        self._note_leader_epoch()
        self.maybe_increment_high_watermark()
        self.host.leadership_changed(self)

    def set_replicas(self, replicas: list[int], leaving: list[int]) -> None:
        """The assignment changed (a reassignment, broker/cluster/reassignment.py). A replica that joins
        starts empty and copies from this leader's log start offset, never below it, so its log start
        counts as that until it fetches in range (its first fetch, at 0, is out of range and starts it
        over there): the low watermark does not go back. A replica that is leaving is not taken back
        into the ISR (the controller takes it out before the assignment drops it); one that has left
        is forgotten."""
        self.replicas = list(replicas)
        self.leaving = set(leaving)
        if not self.is_leader:
            return
        now = _now_ms()
        for replica in replicas:
            if replica != self.local_id and replica not in self.followers:
                self.followers[replica] = FollowerState(replica, log_start_offset=self.log.log_start_offset,
                                                        last_caught_up_ms=now, joining=True)
        for gone in set(self.followers) - set(replicas):
            del self.followers[gone]

    def _fresh_followers(self) -> dict[int, FollowerState]:
        """The other replicas, nothing known of them yet; each is given replica.lag.time.max.ms from now
        before it can be dropped from the ISR."""
        now = _now_ms()
        return {r: FollowerState(r, last_caught_up_ms=now) for r in self.replicas if r != self.local_id}

    def make_follower(self, leader_id: int, leader_epoch: int, isr: set[int]) -> None:
        """Follow `leader_id` at `leader_epoch`: produce and consumer fetches here are refused from now
        on (NOT_LEADER_OR_FOLLOWER), and waiting requests are answered."""
        if self.is_leader:
            self.reset_producers()  # rebuilt from the log when it is needed
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        RESOLVE_GENERATION.bump()  # a cached Fetch resolve checked the old role
        self.isr = set(isr)
        self.followers = {}
        self.host.leadership_changed(self)

    # --- as a follower ---------------------------------------------------------------------------

    async def append_as_follower(self, records: memoryview) -> None:
        """Whole batches from the leader, offsets and epochs as the leader wrote them."""
        if self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.topic_partition} is led here")
        # The batches are in the log once append_nowait returns (before any await): a table loaded
        # before that and not reset since takes them here; any other load reads them from the log.
        loaded, generation = self.producers_loaded, self._producers_generation
        await self.log.append(records, assign_offsets=False)
        if loaded and generation == self._producers_generation:
            self._replay_as_follower(records)
        self.host.appended(self)

    def _replay_as_follower(self, records: memoryview) -> None:
        """Follow the leader's producers and transactions from the batches it sent (headers, and
        the one record of each marker), indexing the aborts as the leader did."""
        for batch in iter_batches(records):
            header = batch.header()
            control_type = -1
            if header.is_control:
                try:
                    control_type = read_marker(batch)[0]
                except ProtocolError:
                    control_type = -1
            aborted = self.producers.apply(header, control_type)
            if aborted is not None:
                self.log.record_aborted_txn(aborted)

    def follow_leader_offsets(self, leader_high_watermark: int, leader_log_start_offset: int) -> bool:
        """The leader's high watermark (capped at our log end) and log start offset, in memory; True
        when the start moved: ReplicaManager.make_start_offsets_durable then makes it durable, before the next Fetch
        reports it to the leader (one checkpoint write for every partition of a Fetch answer)."""
        log_ = self.log
        if leader_high_watermark > log_.high_watermark:
            log_.update_high_watermark(min(leader_high_watermark, log_.log_end_offset))
            self.producers.high_watermark_moved(log_.high_watermark)
            self.host.high_watermark_moved(self)
        if leader_log_start_offset > log_.log_start_offset:
            return self._move_start(min(leader_log_start_offset, log_.high_watermark),
                                    StartOffsetReason.LEADER_OFFSET_INCREMENTED)
        return False

    def _move_start(self, offset: int, reason: StartOffsetReason) -> bool:
        """Move the log start offset; True when it moved (the host learns what went, for the metrics)."""
        before, size_before = self.log.log_start_offset, self.log.size_bytes
        self.log.move_log_start_offset(offset, reason)
        if self.log.log_start_offset == before:
            return False
        self.host.records_deleted(self, reason, self.log.log_start_offset - before, size_before - self.log.size_bytes)
        return True

    async def truncate_as_follower(self, diverging_epoch: int, diverging_end_offset: int) -> None:
        """The leader says our log diverges from its own after `diverging_end_offset` (the end of
        `diverging_epoch` there): cut ours at the earlier of that and our own end of that epoch."""
        epoch, own_end = self.log.epoch_cache.end_offset_for(diverging_epoch, self.log.log_end_offset)
        if diverging_epoch < 0 or epoch < 0:
            offset: int = self.log.high_watermark  # nothing to compare: keep only what was committed
        elif epoch != diverging_epoch:
            offset = own_end  # we never saw that epoch: cut to the end of ours before it, then ask again
        else:
            offset = min(own_end, diverging_end_offset)
        offset = max(0, min(offset, self.log.log_end_offset))
        log.info("truncating diverged follower log", partition=str(self.topic_partition), offset=offset,
                 leader_epoch=diverging_epoch, log_end_offset=self.log.log_end_offset)
        await self.truncate_log_to(offset)  # the table and any snapshot beyond the cut go too

    def _note_leader_epoch(self) -> None:
        # Kafka's makeLeader: the new epoch starts at the current log end offset, so
        # OffsetForLeaderEpoch answers for it before anything is written under it.
        if self.log.epoch_cache.latest_epoch < self.leader_epoch:
            self.log.epoch_cache.assign(self.leader_epoch, self.log.log_end_offset)

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's Partition.checkCurrentLeaderEpoch: -1 skips the check."""
        if current_leader_epoch == NO_LEADER_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH,
                                 f"{self.topic_partition}: leader epoch {current_leader_epoch} is older than "
                                 f"{self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH,
                                 f"{self.topic_partition}: leader epoch {current_leader_epoch} is newer than "
                                 f"{self.leader_epoch}")

    def check_leader(self) -> None:
        if not self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 f"{self.topic_partition}: broker {self.local_id} is not the leader")

    # --- watermarks ------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """How far a READ_COMMITTED reader may read: the first offset of the earliest transaction not
        settled yet (open, or its marker not yet replicated), never below the log start offset
        (DeleteRecords may pass an open transaction), never above the high watermark. Right once the
        producer table is loaded (`load_producer_state`)."""
        high_watermark = self.log.high_watermark
        producers = self.producers
        if not producers.ongoing and not producers.unreplicated:  # no transaction: no call (every fetch asks)
            return high_watermark
        first_unstable = producers.first_unstable_offset()
        if first_unstable is None:
            return high_watermark
        return min(high_watermark, max(first_unstable, self.log.log_start_offset))

    def cleaning_bound(self) -> int:
        """How far the log cleaner may clean: the last stable offset. Until the producer table is loaded
        the open transactions are unknown: nothing, and the load starts for the cleaner's next look."""
        if not self.producers_loaded and self._producers_loading is None:
            asyncio.ensure_future(self.load_producer_state()).add_done_callback(_log_failed_load)
        return self.last_stable_offset if self.producers_loaded else self.log.log_start_offset

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a READ_COMMITTED reader of [fetch_offset, upper_offset) skips."""
        return self.log.aborted_txns.collect(fetch_offset, upper_offset)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def low_watermark(self) -> int:
        """Kafka's lowWatermarkIfLeader: the smallest log start offset among the leader and every
        alive replica of the assignment (in sync or not)."""
        offsets: list[int] = [self.log.log_start_offset]
        offsets += [f.log_start_offset for f in self.followers.values() if self.host.is_alive(f.replica_id)]
        return min(offsets)

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark up to the smallest log end offset in the ISR; wakes waiters."""
        target: int = self.log.log_end_offset
        for replica, follower in self.followers.items():  # on every append: no lists built
            if follower.log_end_offset < target and replica in self.isr:
                target = follower.log_end_offset
        if target <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(target)
        self.producers.high_watermark_moved(target)
        self.host.high_watermark_moved(self)
        return True

    def update_follower_state(self, replica_id: int, fetch_offset: int, log_start_offset: int) -> None:
        """A follower fetched at `fetch_offset`, so its log ends there; it reports its log start."""
        state = self.followers.get(replica_id)
        if state is None:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 f"{self.topic_partition}: broker {replica_id} is not a replica")
        low_before = self.low_watermark()
        now = _now_ms()
        leader_end = self.log.log_end_offset
        # Kafka's Replica.updateFetchState: caught up now when asking from the leader's log end, or as
        # of the previous fetch when asking from where the leader's log ended then (a follower under
        # steady load is always one fetch behind the very end).
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = now
        elif fetch_offset >= state.last_fetch_leader_log_end_offset >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.last_fetch_leader_log_end_offset = leader_end
        state.log_end_offset = fetch_offset
        if state.joining and fetch_offset < self.log.log_start_offset:
            pass  # out of range: it starts over at our log start, which it already counts as
        else:
            state.joining = False
            state.log_start_offset = log_start_offset
        state.last_fetch_ms = now
        self.maybe_expand_isr(state)
        self.maybe_increment_high_watermark()
        if self.low_watermark() != low_before:
            self.host.log_start_offset_moved(self)

    # --- the in-sync replica set (leader) --------------------------------------------------------

    def maybe_expand_isr(self, state: FollowerState) -> None:
        """A follower outside the ISR that has reached the high watermark (and this term's first
        offset) is back in sync: Kafka's isFollowerInSync."""
        if state.replica_id in self.isr or state.replica_id in self.leaving:
            return
        if state.log_end_offset < self.log.high_watermark:
            return
        if state.log_end_offset < self.log.epoch_cache.start_offset_of(self.leader_epoch, self.log.log_end_offset):
            return
        self.host.request_isr_change(self, self.isr | {state.replica_id})

    def lagging_replicas(self, lag_time_max_ms: int, now_ms: int | None = None) -> set[int]:
        """ISR members that have not caught up with the log end within `lag_time_max_ms`."""
        now = _now_ms() if now_ms is None else now_ms
        return {r for r, f in self.followers.items()
                if r in self.isr and now - f.last_caught_up_ms > lag_time_max_ms}

    # --- appending -------------------------------------------------------------------------------

    async def append_records_as_leader(self, records: memoryview, batch: RecordBatch, required_acks: int,
                                       origin: AppendOrigin = AppendOrigin.CLIENT,
                                       verification_guard: object | None = None,
                                       marker_transaction_version: int = 0,
                                       written: Callable[[AppendResult], None] | None = None) -> AppendResult:
        """Append one batch (already checked for shape by its writer). With acks=-1 the ISR must hold
        min.insync.replicas first (Kafka's appendRecordsToLeader: every writer, clients and the
        group coordinator alike). Idempotent batches go through the producer checks; a duplicate
        returns the original offsets unwritten; a coordinator's transactional batch (TxnOffsetCommit's
        offsets) carries no sequence, so only its epoch is checked, as in Kafka. A batch verified with
        the coordinator (broker/txn/verification.py) that would open a transaction here presents its
        guard: gone (a marker came meanwhile), INVALID_TXN_STATE. A client's control batch is refused
        here, INVALID_RECORD, after its verification (Kafka's log refuses it). `written` is told the result once the
        batch is in the log, before any flush is awaited (the writer's view of the log must not lag it).
        LogError and PartitionError carry the error code."""
        await self._ready_to_append(required_acks)
        header = batch.header()
        producer_id = header.producer_id
        if header.attributes & CONTROL_BIT:
            if origin is AppendOrigin.CLIENT:  # Kafka's LogValidator: markers are the coordinators' alone
                raise UnnamedAppendError("Clients are not allowed to write control records")
            return await self._append_marker(records, batch, header, marker_transaction_version, written)
        log_ = self.log
        validated_under = None
        if needs_validation(log_.config, header, now := log_.clock()):  # timestamps, recompression
            validated_under = log_.config  # its records read, keys included
            records, batch = await validate(validated_under, self.topic_partition, records, batch, now,
                                            self.host.run_io)
            header = batch.header()
            # Kafka holds its locks from validation to the producer update; here leadership may have
            # gone and come back meanwhile (each role change resets the table): check again.
            await self._ready_to_append(required_acks)
        # From here to the producer state update nothing awaits: check, write and record are atomic.
        first_seq = last_seq = -1
        epoch = header.producer_epoch
        transactional = bool(header.attributes & TRANSACTIONAL_BIT)
        if producer_id >= 0:
            first_seq = header.base_sequence
            last_seq = last_sequence(first_seq, header.last_offset_delta)
            try:
                # A client's retry is answered with its original offsets before the guard is looked at
                # (check() below finds it), as Kafka 4.3.1's UnifiedLog does.
                if (verification_guard is not None and transactional
                        and not self.producers.in_transaction(producer_id, epoch)
                        and (origin is not AppendOrigin.CLIENT
                             or self.producers.duplicate_of(producer_id, epoch, first_seq, last_seq) is None)):
                    self.producers.check_epoch(producer_id, epoch)  # a fenced epoch first, as Kafka 4.3.1
                    if self.producers.verifying.get(producer_id) is not verification_guard:
                        raise PartitionError(ErrorCode.INVALID_TXN_STATE,
                                             f"{self.topic_partition}: the transaction of producer {producer_id} "
                                             "ended while the batch was verified")
                if origin is AppendOrigin.COORDINATOR:
                    self.producers.check_epoch(producer_id, epoch)
                    duplicate = None
                else:
                    duplicate = self.producers.check(producer_id, epoch, first_seq, last_seq, transactional)
            except ProducerStateError as exc:
                raise PartitionError(exc.error_code, f"{self.topic_partition}: {exc.message}") from None
            if duplicate is not None:
                try:
                    batch.validate()  # a damaged retry is CORRUPT_MESSAGE, as the log would say
                except ProtocolError as exc:
                    raise PartitionError(exc.error_code, f"{self.topic_partition}: {exc.message}") from None
                log.info("duplicate batch from an idempotent producer", partition=str(self.topic_partition),
                         producer_id=producer_id, epoch=epoch, sequence=first_seq,
                         offset=duplicate.first_offset)
                append_time = duplicate.timestamp if self.log.config.log_append_time else -1
                return AppendResult(duplicate.first_offset, duplicate.last_offset, append_time,
                                    self.log.log_start_offset, duplicate=True)
        info = self.log.append_nowait(records, leader_epoch=self.leader_epoch,
                                      keys_checked=validated_under is self.log.config)
        if producer_id >= 0:
            self.producers.update(producer_id, epoch, BatchMetadata(first_seq, last_seq, info.first_offset,
                                                                    info.last_offset, info.max_timestamp),
                                  transactional=transactional)
        return await self._appended(info, written)

    async def _ready_to_append(self, required_acks: int) -> None:
        """Return leading, with min.insync.replicas for acks=-1 and the table loaded (every reset unloads
        it: a loaded one is this leader's log's), nothing awaited since any of them was checked."""
        while True:
            self.check_leader()
            if required_acks == -1 and len(self.isr) < self.log.config.min_insync_replicas:
                raise PartitionError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                     f"The in-sync replicas of {self.topic_partition} ({len(self.isr)}) are fewer "
                                     f"than min.insync.replicas ({self.log.config.min_insync_replicas})")
            if self.producers_loaded:
                return
            await self.load_producer_state()  # then leadership and the ISR are looked at again

    async def _append_marker(self, records: memoryview, batch: RecordBatch, header: BatchHeader,
                             transaction_version: int, written: Callable[[AppendResult], None] | None
                             ) -> AppendResult:
        """A transaction coordinator's COMMIT or ABORT marker: it closes the producer's transaction
        here, and an abort is indexed for READ_COMMITTED readers."""
        try:
            batch.validate(header)
            control_type, coordinator_epoch = read_marker(batch)
        except ProtocolError as exc:
            raise PartitionError(exc.error_code, f"{self.topic_partition}: {exc.message}") from None
        if control_type < 0 or header.producer_id < 0:
            raise PartitionError(ErrorCode.INVALID_RECORD, f"{self.topic_partition}: a control batch that is no "
                                                           "transaction marker")
        try:
            self.producers.check_marker(header.producer_id, header.producer_epoch, coordinator_epoch,
                                        transaction_version)
        except ProducerStateError as exc:
            raise PartitionError(exc.error_code, f"{self.topic_partition}: {exc.message}") from None
        info = self.log.append_nowait(records, leader_epoch=self.leader_epoch)
        written_at = info.log_append_time if info.log_append_time >= 0 else header.max_timestamp
        aborted = self.producers.complete_txn(header.producer_id, header.producer_epoch, control_type,
                                              coordinator_epoch, info.first_offset, written_at)
        if aborted is not None:
            self.log.record_aborted_txn(aborted)
        return await self._appended(info, written)

    async def _appended(self, info: AppendInfo, written: Callable[[AppendResult], None] | None = None
                        ) -> AppendResult:
        if not self.maybe_increment_high_watermark():  # when it moves, waiting fetches hear of that
            self.host.appended(self)
        result = AppendResult(info.first_offset, info.last_offset, info.log_append_time, info.log_start_offset)
        if written is not None:
            written(result)
        if self.log.log_end_offset - self.log.recovery_point >= self.log.config.flush_messages:
            await self.log.flush()  # flush.messages, as PartitionLog.append would
        return result

    def acks_outcome(self, required_offset: int) -> ErrorCode | None:
        """Where an acks=-1 append that ends before `required_offset` stands (Kafka's
        checkEnoughReplicasReachOffset): None while the ISR has not reached it on this leader;
        NONE once it has, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below min.insync.replicas
        meanwhile; NOT_LEADER_OR_FOLLOWER if leadership moved first (the batch may or may not survive
        on the new leader)."""
        log_ = self.log
        if log_.high_watermark >= required_offset:
            if len(self.isr) < log_.config.min_insync_replicas:
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return ErrorCode.NONE
        return None if self.leader_id == self.local_id else ErrorCode.NOT_LEADER_OR_FOLLOWER

    # --- moving the log start offset -------------------------------------------------------------

    def delete_records_on_leader(self, offset: int, reason: StartOffsetReason) -> tuple[int, bool]:
        """Kafka's Partition.deleteRecordsOnLeader up to the wait for the disk: the log start offset
        moves in memory (-1 means the high watermark; POLICY_VIOLATION, OFFSET_OUT_OF_RANGE and
        KAFKA_STORAGE_ERROR come from the log as LogError). Returns the offset the low watermark must
        reach and whether the start offset moved; ReplicaManager.make_start_offsets_durable follows
        (after every partition of a request has moved, so that one checkpoint write covers them)."""
        self.check_leader()
        wanted = self.log.high_watermark if offset == -1 else offset
        return wanted, self._move_start(wanted, reason)
