"""The transaction coordinator (Kafka's TransactionCoordinator, transactions version 0/1), a broker
service: transactional ids, their producer ids and epochs, and the state machine

    Empty -> Ongoing (AddPartitionsToTxn) -> PrepareCommit | PrepareAbort (EndTxn, a timeout, a
    fencing InitProducerId) -> markers on every partition -> CompleteCommit | CompleteAbort -> Ongoing ...

Every change is a record in `__transaction_state` (broker/txn/state_log.py), written before the
in-memory state changes and before the client is answered; a transactional id with a write in flight
answers CONCURRENT_TRANSACTIONS, as Kafka's pending state does. At start the topic is replayed, and
transactions left in PrepareCommit/PrepareAbort get their markers written and are completed.
Markers go through ReplicaManager.append_records (origin COORDINATOR, acks=-1), carrying the
leader epoch of the id's `__transaction_state` partition as the coordinator epoch. Transactions
open longer than their timeout are aborted with the producer epoch bumped, so the old producer is
fenced (checked every `transaction.abort.timed.out.transaction.cleanup.interval.ms`).

One broker only: in a cluster FindCoordinator names no transaction coordinator yet (the markers
to partitions led elsewhere, WriteTxnMarkers, are not built; docs/features.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from broker.aio import SharedRun, run_to_completion
from broker.config import BrokerConfig
from broker.group.offsets_store import partition_for
from broker.replica import AppendOrigin, PartitionError, ReplicaManager
from broker.topics import TopicError, TopicManager
from broker.txn.state_log import (
    TRANSACTION_STATE_TOPIC,
    TopicPartitionKey,
    TxnMetadata,
    TxnState,
    key_bytes,
    replay_partition,
    value_bytes,
)
from protocol.control_records import ControlType, build_marker_batch
from protocol.errors import CodedError, ErrorCode
from protocol.records import RecordBatch, build_batch

log = structlog.get_logger("transactions")

MAX_EPOCH = 2**15 - 1
MAX_ID_BYTES = 2**15 - 1
WRITE_TIMEOUT_MS = 5000  # Kafka's request.timeout.ms for the coordinator's own appends
MARKER_RETRY_S = 0.1
_COORDINATOR_ERRORS = {  # an append's error as the coordinator answers it (Kafka's mapping)
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


class TxnError(CodedError):
    """A transactional request refused, with the error code its answer carries."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _log_failure(task: asyncio.Task) -> None:
    """A background task's end: an exception nobody awaits is logged, never dropped."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("transaction coordinator task failed", task=task.get_name(), error=repr(exc), exc_info=exc)


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, topics: TopicManager, replicas: ReplicaManager, *,
                 in_cluster: bool) -> None:
        self.settings = config.transactions
        self.topics = topics
        self.replicas = replicas
        self.in_cluster = in_cluster
        self.active = False
        self._txns: dict[str, TxnMetadata] = {}
        self._creating = SharedRun(self._create_topic)
        self._tasks: set[asyncio.Task] = set()
        # Told (topic, partition, producer id, committed) of every marker written (the group store
        # settles TxnOffsetCommit's offsets in `__consumer_offsets` by them).
        self.marker_listeners: list[Callable[[str, int, int, bool], None]] = []

    # --- lifecycle (a broker service) ------------------------------------------------------------

    async def start(self) -> None:
        if self.in_cluster:
            return
        await self._load()
        self.active = True
        self._spawn(self._abort_timed_out_periodically())

    async def stop(self) -> None:
        self.active = False
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=getattr(coro, "__qualname__", None))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)

    async def _load(self) -> None:
        topic = self.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return
        found: dict[str, TxnMetadata | None] = {}
        records = 0
        for index in sorted(topic.replicas):
            try:
                partition = self.replicas.partition(TRANSACTION_STATE_TOPIC, index)
            except PartitionError as exc:
                log.error("transaction state partition not loadable", partition=index, error=exc.message)
                continue
            records += await replay_partition(partition, self.replicas.read_slices, found)
        self._txns = {tid: meta for tid, meta in found.items() if meta is not None}
        log.info("loaded transaction state", records=records, transactional_ids=len(self._txns))
        for meta in self._txns.values():
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._spawn(self._complete(meta, meta.state == TxnState.PREPARE_COMMIT))

    # --- the topic -------------------------------------------------------------------------------

    async def ensure_topic(self) -> None:
        """Create `__transaction_state` on first use; COORDINATOR_NOT_AVAILABLE if that fails."""
        if not self.active:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is not active")
        if self.topics.get(TRANSACTION_STATE_TOPIC) is not None:
            return
        await self._creating.run()

    async def _create_topic(self) -> None:
        s = self.settings
        configs = {"cleanup.policy": "compact", "segment.bytes": str(s.state_log_segment_bytes),
                   "min.insync.replicas": str(s.state_log_min_isr), "compression.type": "uncompressed",
                   "unclean.leader.election.enable": "false"}
        try:
            await self.topics.create(TRANSACTION_STATE_TOPIC, s.state_log_num_partitions,
                                     s.state_log_replication_factor, configs)
        except TopicError as exc:
            if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS or self.topics.get(TRANSACTION_STATE_TOPIC):
                return
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                           f"cannot create {TRANSACTION_STATE_TOPIC}: {exc.message}") from None
        log.info("created the transaction state topic", partitions=s.state_log_num_partitions)

    def _partition_of(self, transactional_id: str) -> int:
        topic = self.topics.get(TRANSACTION_STATE_TOPIC)
        count = len(topic.replicas) if topic is not None else self.settings.state_log_num_partitions
        return partition_for(transactional_id, count)

    # --- the in-memory view ----------------------------------------------------------------------

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def all(self) -> list[TxnMetadata]:
        return list(self._txns.values())

    @property
    def coordinating(self) -> bool:
        return self.active and self.topics.get(TRANSACTION_STATE_TOPIC) is not None

    def _check_coordinating(self) -> None:
        """Kafka's coordinator owns the partitions of an existing `__transaction_state` only (the
        topic is made by the first FindCoordinator): before it, NOT_COORDINATOR."""
        if not self.coordinating:
            raise TxnError(ErrorCode.NOT_COORDINATOR, "this broker coordinates no transactional id yet")

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        """The id's metadata, if the producer id and epoch are its current ones."""
        self._check_coordinating()
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                           f"producer id {producer_id} is not the one of transactional id {transactional_id!r}")
        if meta.producer_epoch != producer_epoch:
            raise TxnError(ErrorCode.PRODUCER_FENCED,
                           f"epoch {producer_epoch} of producer {producer_id} is not the current {meta.producer_epoch}")
        if meta.pending:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, f"{transactional_id!r} is changing state")
        return meta

    # --- the requests ----------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> tuple[int, int]:
        """InitProducerId with a transactional id: (producer id, epoch), the epoch bumped so that
        any older instance is fenced. An open transaction is aborted first (CONCURRENT_TRANSACTIONS:
        the client retries once the abort completed)."""
        if len(transactional_id.encode()) > MAX_ID_BYTES:  # the state record's key is an int16-sized string
            raise TxnError(ErrorCode.INVALID_REQUEST, f"a transactional id is at most {MAX_ID_BYTES} bytes")
        if timeout_ms <= 0 or timeout_ms > self.settings.max_timeout_ms:
            raise TxnError(ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                           f"transaction timeout {timeout_ms} ms is outside (0, {self.settings.max_timeout_ms}]")
        self._check_coordinating()
        meta = self._txns.get(transactional_id)
        if meta is None:
            producer_ids = self.replicas.producer_ids
            assert producer_ids is not None  # made when the replicas start
            meta = TxnMetadata(transactional_id, await producer_ids.next_id(), -1, timeout_ms)
            await self._write(meta, TxnState.EMPTY, set(), -1, epoch=0, new=True)
            return meta.producer_id, meta.producer_epoch
        if meta.pending or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                                          TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, f"{transactional_id!r} is completing a transaction")
        if producer_id >= 0 and (producer_id != meta.producer_id
                                 or producer_epoch not in (meta.producer_epoch, meta.last_producer_epoch)):
            raise TxnError(ErrorCode.PRODUCER_FENCED,
                           f"producer {producer_id} epoch {producer_epoch} is not the current one of "
                           f"{transactional_id!r}")
        if meta.state == TxnState.ONGOING:
            await self._fence_and_abort(meta)
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS,
                           f"aborting the open transaction of {transactional_id!r} first")
        meta.timeout_ms = timeout_ms
        if meta.producer_epoch >= MAX_EPOCH - 1:  # epoch exhausted: a new producer id starts at 0
            producer_ids = self.replicas.producer_ids
            assert producer_ids is not None
            meta.producer_id, meta.producer_epoch = await producer_ids.next_id(), -1
        await self._write(meta, TxnState.EMPTY, set(), -1, epoch=meta.producer_epoch + 1)
        return meta.producer_id, meta.producer_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: set[TopicPartitionKey]) -> None:
        meta = self._checked(transactional_id, producer_id, producer_epoch)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, f"{transactional_id!r} is completing a transaction")
        if meta.state == TxnState.ONGOING and partitions <= meta.partitions:
            return
        start = meta.start_ms if meta.state == TxnState.ONGOING else _now_ms()
        await self._write(meta, TxnState.ONGOING, meta.partitions | partitions, start, epoch=meta.producer_epoch)

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partition: TopicPartitionKey) -> ErrorCode:
        """Whether a transactional batch may be written: its partition was added to the producer's
        open transaction (KIP-890 part 1's check, asked here directly on one broker)."""
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch < meta.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if meta.state != TxnState.ONGOING or partition not in meta.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        meta = self._checked(transactional_id, producer_id, producer_epoch)
        state = meta.state
        finished, preparing = ((TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT) if commit
                               else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT))
        if state == finished:
            return  # a retry of an EndTxn that completed
        if state == preparing:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, f"{transactional_id!r} is completing this transaction")
        if state != TxnState.ONGOING:
            raise TxnError(ErrorCode.INVALID_TXN_STATE,
                           f"{transactional_id!r} is {state.display_name}: no transaction to "
                           f"{'commit' if commit else 'abort'}")
        await self._write(meta, preparing, meta.partitions, meta.start_ms, epoch=meta.producer_epoch)
        self._spawn(self._complete(meta, commit))

    # --- state changes ---------------------------------------------------------------------------

    async def _write(self, meta: TxnMetadata, state: TxnState, partitions: set[TopicPartitionKey], start_ms: int,
                     *, epoch: int, new: bool = False) -> None:
        """Write the id's next state, then take it in memory (run to its end even if the client goes)."""
        meta.pending = True
        try:
            await run_to_completion(self._append(meta, state, partitions, start_ms, epoch))
        finally:
            meta.pending = False
        if epoch != meta.producer_epoch:
            meta.last_producer_epoch = meta.producer_epoch
        meta.producer_epoch = epoch
        meta.state, meta.partitions, meta.start_ms = state, set(partitions), start_ms
        meta.update_ms = _now_ms()
        if new:
            self._txns[meta.transactional_id] = meta

    async def _append(self, meta: TxnMetadata, state: TxnState, partitions: set[TopicPartitionKey],
                      start_ms: int, epoch: int) -> None:
        now = _now_ms()
        data = build_batch([(key_bytes(meta.transactional_id),
                             value_bytes(meta, state, partitions, start_ms, now, epoch), [], now)])
        index = self._partition_of(meta.transactional_id)
        [result] = await self.replicas.append_records(
            [(TRANSACTION_STATE_TOPIC, index, memoryview(data), RecordBatch(data))], required_acks=-1,
            timeout_ms=WRITE_TIMEOUT_MS, origin=AppendOrigin.COORDINATOR, internal_topics_allowed=True)
        if result.error_code != ErrorCode.NONE:
            code = _COORDINATOR_ERRORS.get(result.error_code, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            log.warning("transaction state write failed", transactional_id=meta.transactional_id,
                        error=ErrorCode(result.error_code).name, answered=code.name, reason=result.error_message)
            raise TxnError(code, result.error_message or "")

    async def _fence_and_abort(self, meta: TxnMetadata) -> None:
        """Abort the open transaction under a bumped epoch (its producer is fenced by it)."""
        epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH - 1 else meta.producer_epoch
        await self._write(meta, TxnState.PREPARE_ABORT, meta.partitions, meta.start_ms, epoch=epoch)
        self._spawn(self._complete(meta, commit=False))

    async def _complete(self, meta: TxnMetadata, commit: bool) -> None:
        """Write the markers, then the Complete state; retried until both are written."""
        kind = ControlType.COMMIT if commit else ControlType.ABORT
        remaining = set(meta.partitions)
        while remaining:
            for tp in sorted(remaining):
                try:
                    written = await self._write_marker(meta, kind, tp)
                except Exception as exc:  # anything unforeseen: logged, and the marker retried
                    log.error("transaction marker write failed", transactional_id=meta.transactional_id,
                              partition=f"{tp[0]}-{tp[1]}", error=repr(exc), exc_info=exc)
                    written = False
                if written:
                    remaining.discard(tp)
            if remaining:
                await asyncio.sleep(MARKER_RETRY_S)
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        while True:
            try:
                await self._write(meta, done, set(), meta.start_ms, epoch=meta.producer_epoch)
                break
            except TxnError as exc:
                log.warning("cannot complete transaction yet", transactional_id=meta.transactional_id,
                            error=exc.message)
                await asyncio.sleep(MARKER_RETRY_S)
            except Exception as exc:  # anything unforeseen: logged, and the write retried
                log.error("cannot complete transaction yet", transactional_id=meta.transactional_id,
                          error=repr(exc), exc_info=exc)
                await asyncio.sleep(MARKER_RETRY_S)
        log.info("transaction completed", transactional_id=meta.transactional_id, producer_id=meta.producer_id,
                 epoch=meta.producer_epoch, result=done.display_name)

    async def _write_marker(self, meta: TxnMetadata, kind: ControlType, tp: TopicPartitionKey) -> bool:
        """True once the partition holds the marker, or no longer exists (its topic was deleted)."""
        try:
            index = self._partition_of(meta.transactional_id)
            coordinator_epoch = self.replicas.partition(TRANSACTION_STATE_TOPIC, index).leader_epoch
        except PartitionError:
            coordinator_epoch = 0
        data = build_marker_batch(kind, meta.producer_id, meta.producer_epoch, coordinator_epoch, _now_ms())
        [result] = await self.replicas.append_records(
            [(tp[0], tp[1], memoryview(data), RecordBatch(data))], required_acks=-1, timeout_ms=WRITE_TIMEOUT_MS,
            origin=AppendOrigin.COORDINATOR, internal_topics_allowed=True)
        code = result.error_code
        if code == ErrorCode.NONE:
            for listener in self.marker_listeners:
                listener(tp[0], tp[1], meta.producer_id, kind == ControlType.COMMIT)
            return True
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return True
        if code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED):
            # A newer epoch or coordinator already wrote here: this marker is not needed any more.
            log.warning("transaction marker refused", partition=f"{tp[0]}-{tp[1]}", error=ErrorCode(code).name)
            return True
        log.info("transaction marker not written yet", partition=f"{tp[0]}-{tp[1]}", error=ErrorCode(code).name)
        return False

    async def _abort_timed_out_periodically(self) -> None:
        interval = self.settings.abort_timed_out_cleanup_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.abort_timed_out()
            except Exception as exc:  # logged; the next round tries again
                log.error("aborting timed-out transactions failed", error=repr(exc), exc_info=exc)

    async def abort_timed_out(self, now_ms: int | None = None) -> int:
        """Abort, with the epoch bumped, every transaction open longer than its timeout."""
        now = _now_ms() if now_ms is None else now_ms
        expired = [m for m in self._txns.values()
                   if m.state == TxnState.ONGOING and not m.pending and now > m.start_ms + m.timeout_ms]
        for meta in expired:
            log.info("aborting a timed-out transaction", transactional_id=meta.transactional_id,
                     producer_id=meta.producer_id, epoch=meta.producer_epoch)
            try:
                await self._fence_and_abort(meta)
            except TxnError as exc:
                log.warning("cannot abort timed-out transaction yet", transactional_id=meta.transactional_id,
                            error=exc.message)
        return len(expired)
