"""The transaction coordinator (Kafka's TransactionCoordinator, transactions versions 0-2: version 2's
EndTxn rules in broker/txn/tv2.py), a broker service: transactional ids, their producer ids and
epochs, and the state machine

    Empty -> Ongoing (AddPartitionsToTxn) -> PrepareCommit | PrepareAbort (EndTxn, a timeout, a
    fencing InitProducerId) -> markers on every partition -> CompleteCommit | CompleteAbort -> Ongoing ...

Every change is a record in `__transaction_state` (broker/txn/state_log.py), written before the
in-memory state changes and before the client is answered; a transactional id with a write in flight,
or with its markers being written (PrepareCommit/PrepareAbort until Complete*), answers
CONCURRENT_TRANSACTIONS, as Kafka's pending state does. Markers go to each partition's
leader (broker/txn/markers.py: through ReplicaManager.append_records when led here, else a
WriteTxnMarkers request), carrying the leader epoch of the id's `__transaction_state` partition as
the coordinator epoch, and are retried until written (broker/txn/completion.py). Transactions open
longer than their timeout are aborted with the producer epoch bumped, so the old producer is fenced (checked every
`transaction.abort.timed.out.transaction.cleanup.interval.ms`); ids idle longer than
`transactional.id.expiration.ms` are removed by a tombstone (checked every
`transaction.remove.expired.transaction.cleanup.interval.ms`).

One broker replays the whole topic at start. In a cluster an id belongs to the leader of its
`__transaction_state` partition (broker/coordinator_partitions.py, shared with the group
coordinator): a partition whose leadership moves here is replayed (COORDINATOR_LOAD_IN_PROGRESS
meanwhile), one that moves away is dropped (NOT_COORDINATOR). Either way, transactions found in
PrepareCommit/PrepareAbort get their markers sent again and are completed; a completion under way
stops when its id is dropped here (the new coordinator finishes it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import structlog

from broker.aio import every, run_to_completion
from broker.config import BrokerConfig, TransactionConfig
from broker.coordinator_partitions import CoordinatorPartitions
from broker.replica import Partition, PartitionError, ReplicaManager
from broker.txn.completion import TxnCompletions
from broker.txn.expiry import remove_expired_ids
from broker.txn.markers import MarkerListener, MarkerSender, MarkerWriter
from broker.txn.peers import PeerConnections
from broker.txn.state_log import (
    TRANSACTION_STATE_TOPIC,
    WRITE_TIMEOUT_MS,
    TopicPartitionKey,
    TxnError,
    TxnMetadata,
    TxnState,
    append_state,
    key_bytes,
    replay_partition,
    value_bytes,
    value_version,
)
from broker.txn.state_topic import TxnStateTopic, TxnTopics
from broker.txn.tv2 import TV0, TV2, Answered, end_txn_verdict, epoch_exhausted
from broker.txn.verification import TxnVerifier
from protocol.errors import ErrorCode

log = structlog.get_logger("transactions")

MAX_ID_BYTES = 2**15 - 1
_WRITTEN_FIELDS = ("producer_id", "producer_epoch", "last_producer_epoch", "state", "partitions", "start_ms",
                   "timeout_ms", "update_ms", "prev_producer_id", "next_producer_id", "client_transaction_version")
_COORDINATOR_ERRORS = {  # an append's error as the coordinator answers it (Kafka's mapping)
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


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
    def __init__(self, config: BrokerConfig, topics: TxnTopics, replicas: ReplicaManager, *,
                 in_cluster: bool, settings: TransactionConfig | None = None,
                 transaction_version: int | None = None) -> None:
        """`settings`: the transaction.* properties in force (the broker's dynamic configs give them,
        and set them again when they change); by default the properties file's.
        `transaction_version`: the cluster's finalized level (broker/features.py); by default the setting."""
        self.settings = config.transactions if settings is None else settings
        self.transaction_version = (config.transactions.transaction_version if transaction_version is None
                                    else transaction_version)
        self.topics = topics
        self.replicas = replicas
        self.in_cluster = in_cluster
        self.active = False
        self._txns: dict[str, TxnMetadata] = {}
        self._creating: set[str] = set()  # new ids whose first state is being written
        self.state_topic = TxnStateTopic(topics, self.settings)
        self._tasks: set[asyncio.Task] = set()
        # The partition leader's side of markers (WriteTxnMarkers is served through it) and ours.
        self.markers = MarkerWriter(replicas, WRITE_TIMEOUT_MS)
        self._peers = PeerConnections(config.node_id, replicas.endpoint, config.inter_broker_security,
                                      WRITE_TIMEOUT_MS)
        self._sender = MarkerSender(self.markers, topics, config.node_id, in_cluster, self._peers)
        # The leader's side of KIP-890 for ids coordinated elsewhere (Produce asks it).
        self.verifier = TxnVerifier(replicas, topics, self._peers, config.node_id, self.state_topic.partition_of,
                                    self.verify_partitions, self.add_partitions_answer,
                                    lambda tid: self.not_served(tid) is None)
        self.partitions = CoordinatorPartitions(
            TRANSACTION_STATE_TOPIC, self._spawn, lambda index: replicas.partition(TRANSACTION_STATE_TOPIC, index),
            load=self._load_partition, unload=self._unload_partition)
        # The markers and Complete state after each Prepare (broker/txn/completion.py).
        self._completions = TxnCompletions(self._sender, self.partitions, self.partition_of, self._owns,
                                           self._write, self._spawn)

    @property
    def marker_listeners(self) -> list[MarkerListener]:
        """Told (topic, partition, producer id, committed) of every marker written on this broker (the
        group store settles TxnOffsetCommit's offsets in `__consumer_offsets` by them)."""
        return self.markers.listeners

    # --- lifecycle (a broker service) ------------------------------------------------------------

    async def start(self) -> None:
        if self.in_cluster:
            # Only the partitions led here are ours, and leadership may move while they load: follow it
            # from the start, and load each led partition as if it had just moved here.
            self.active = True
            self.replicas.leadership_listeners.append(self._partition_moved)
            self.replicas.forget_listeners.append(self.partitions.forgotten)
            self.partitions.follow(self._local_partitions())
        else:
            await self._load()
            self.active = True
        self._spawn(self._abort_timed_out_periodically())
        self._spawn(every(self.settings.remove_expired_cleanup_interval_ms, lambda: self.remove_expired(),
                          log, "removing expired transactional ids failed"))

    async def stop(self) -> None:
        self.active = False
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._peers.close()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=getattr(coro, "__qualname__", None))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)
        return task

    # --- leadership of `__transaction_state` partitions (a cluster) -------------------------------

    def _local_partitions(self) -> list[Partition]:
        topic = self.topics.get(TRANSACTION_STATE_TOPIC)
        return self.partitions.local(sorted(topic.replicas) if topic is not None else [])

    def _partition_moved(self, partition: Partition) -> None:
        if self.active:
            self.partitions.moved(partition)

    async def _load_partition(self, index: int, partition: Partition) -> None:
        found: dict[str, TxnMetadata | None] = {}
        records = await replay_partition(partition, self.replicas.read_slices, found)
        loaded = [meta for meta in found.values() if meta is not None]
        # The completions spawned below first run once this load has returned and the partition is served.
        for meta in loaded:
            self._txns[meta.transactional_id] = meta
        log.info("transaction state loaded: this broker leads its partition now", partition=index,
                 records=records, transactional_ids=len(loaded))
        self._complete_prepared(loaded)

    def _unload_partition(self, index: int) -> None:
        doomed = [tid for tid in self._txns if self.partition_of(tid) == index]
        for tid in doomed:
            del self._txns[tid]
        if doomed:
            log.info("transaction state unloaded: its partition is led elsewhere now", partition=index,
                     transactional_ids=len(doomed))

    def _owns(self, meta: TxnMetadata) -> bool:
        """Still this coordinator's (not dropped by a leadership move, nor replaced by a reload), and
        in a cluster its partition still led and loaded here."""
        if not self.active or self._txns.get(meta.transactional_id) is not meta:
            return False
        return not self.in_cluster or self.partitions.not_served(self.partition_of(meta.transactional_id)) is None

    def _complete_prepared(self, found: list[TxnMetadata]) -> None:
        for meta in found:
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._completions.start(meta, meta.state == TxnState.PREPARE_COMMIT)

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
        self._complete_prepared(list(self._txns.values()))

    # --- the topic -------------------------------------------------------------------------------

    async def ensure_topic(self) -> None:
        """Create `__transaction_state` on first use; COORDINATOR_NOT_AVAILABLE if that fails."""
        if not self.active:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the transaction coordinator is not active")
        await self.state_topic.ensure()

    def partition_of(self, transactional_id: str) -> int:
        """The `__transaction_state` partition of the id (its leader is the id's coordinator)."""
        return self.state_topic.partition_of(transactional_id)

    # --- the in-memory view ----------------------------------------------------------------------

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def all(self) -> list[TxnMetadata]:
        return list(self._txns.values())

    @property
    def coordinating(self) -> bool:
        return self.active and self.topics.get(TRANSACTION_STATE_TOPIC) is not None

    def not_served(self, transactional_id: str) -> ErrorCode | None:
        """Why this broker cannot answer for the id now, or None. Kafka's coordinator owns the
        partitions of an existing `__transaction_state` only (the topic is made by the first
        FindCoordinator): before it, NOT_COORDINATOR; in a cluster, only those it leads and has loaded."""
        if not self.coordinating:
            return ErrorCode.NOT_COORDINATOR
        if not self.in_cluster:
            return None
        return self.partitions.not_served(self.partition_of(transactional_id))

    def _check_coordinating(self, transactional_id: str) -> None:
        error = self.not_served(transactional_id)
        if error is not None:
            raise TxnError(error, f"this broker does not coordinate transactional id {transactional_id!r} now "
                                  f"({error.name})")

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        """The id's metadata, if the producer id and epoch are its current ones and no change is under
        way: checked in Kafka 4.3.1's EndTxn order, the id, the change under way, then the epoch."""
        self._check_coordinating(transactional_id)
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                           f"producer id {producer_id} is not the one of transactional id {transactional_id!r}")
        if meta.pending:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, f"{transactional_id!r} is changing state")
        if meta.producer_epoch != producer_epoch:
            raise TxnError(ErrorCode.PRODUCER_FENCED,
                           f"epoch {producer_epoch} of producer {producer_id} is not the current {meta.producer_epoch}")
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
        self._check_coordinating(transactional_id)
        meta = self._txns.get(transactional_id)
        if meta is None:
            return await self._create(transactional_id, timeout_ms)
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
        if epoch_exhausted(meta.producer_epoch):  # a new producer id starts at 0
            await self._write(meta, TxnState.EMPTY, set(), -1, epoch=0, timeout_ms=timeout_ms,
                              producer_id=await self._next_producer_id(meta), prev_producer_id=meta.producer_id)
        else:
            await self._write(meta, TxnState.EMPTY, set(), -1, epoch=meta.producer_epoch + 1, timeout_ms=timeout_ms)
        return meta.producer_id, meta.producer_epoch

    async def _create(self, transactional_id: str, timeout_ms: int) -> tuple[int, int]:
        """A new id's first state. Its metadata exists only once written, so a second InitProducerId
        meanwhile is refused by name (else each would take its own producer id and both believe it theirs)."""
        if transactional_id in self._creating:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, f"{transactional_id!r} is being created")
        self._creating.add(transactional_id)
        try:
            producer_id = await self.replicas.producer_ids.next_id()
            # Kafka records a new id's producer id as its previous one too
            meta = TxnMetadata(transactional_id, producer_id, -1, timeout_ms, prev_producer_id=producer_id)
            await self._write(meta, TxnState.EMPTY, set(), -1, epoch=0, new=True)
        finally:
            self._creating.discard(transactional_id)
        return meta.producer_id, meta.producer_epoch

    async def _next_producer_id(self, meta: TxnMetadata) -> int:
        """A new producer id for an id whose epoch ran out. Claiming one may wait on the metadata store, so
        the id is checked again after: another request that changed it meanwhile wins, this one is retried."""
        seen = (meta.state, meta.producer_id, meta.producer_epoch)
        next_id = await self.replicas.producer_ids.next_id()
        if meta.pending or (meta.state, meta.producer_id, meta.producer_epoch) != seen:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, f"{meta.transactional_id!r} changed state meanwhile")
        return next_id

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: set[TopicPartitionKey], *, client_version: int = 0) -> None:
        """AddPartitionsToTxn (`client_version` 2: from a broker, v4+, for a producer on transactions
        version 2: Produce v12 or TxnOffsetCommit v5 adding implicitly)."""
        self._check_coordinating(transactional_id)
        current = self._txns.get(transactional_id)
        # A change under way is answered before the producer id is compared, as Kafka 4.3.1 does: after
        # an exhausted epoch the producer already goes on under the new id while Prepare still holds the old.
        if current is not None and (current.pending or current.state in (TxnState.PREPARE_COMMIT,
                                                                           TxnState.PREPARE_ABORT)):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, f"{transactional_id!r} is completing a transaction")
        meta = self._checked(transactional_id, producer_id, producer_epoch)
        if meta.state == TxnState.ONGOING and partitions <= meta.partitions:
            return
        start = meta.start_ms if meta.state == TxnState.ONGOING else _now_ms()
        await self._write(meta, TxnState.ONGOING, meta.partitions | partitions, start, epoch=meta.producer_epoch,
                          client_transaction_version=client_version)

    async def add_partitions_answer(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    partitions: list[TopicPartitionKey]) -> dict[TopicPartitionKey, ErrorCode]:
        """A leader here adding its partitions for a transactions version 2 producer (as a remote
        leader does with AddPartitionsToTxn v5): each partition's answer."""
        try:
            await self.add_partitions(transactional_id, producer_id, producer_epoch, set(partitions),
                                      client_version=TV2)
        except TxnError as exc:
            return dict.fromkeys(partitions, ErrorCode(exc.error_code))
        return dict.fromkeys(partitions, ErrorCode.NONE)

    def verifies(self, adds: bool) -> bool:
        """Whether a leader verifies a transactional batch with the id's coordinator before its append
        (KIP-890, `verifier`): always for a producer on transactions version 2 (`adds`: the leader adds
        the partition), else as `transaction.partition.verification.enable` says (Kafka's ReplicaManager)."""
        return adds or self.settings.partition_verification_enable

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: list[TopicPartitionKey]) -> dict[TopicPartitionKey, ErrorCode]:
        """AddPartitionsToTxn's verify-only answer (Kafka's handleVerifyPartitionsInTransaction):
        per partition NONE when it is in the open transaction, TRANSACTION_ABORTABLE when not."""
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST)
        meta = self._txns.get(transactional_id)
        error = self.not_served(transactional_id)
        if error is None:
            if meta is None or meta.producer_id != producer_id:
                error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
            elif meta.producer_epoch != producer_epoch:
                error = ErrorCode.PRODUCER_FENCED
            elif meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error is not None or meta is None:
            return dict.fromkeys(partitions, error or ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        return {tp: ErrorCode.NONE if tp in meta.partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in partitions}

    async def end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         commit: bool) -> tuple[int, int]:
        """EndTxn v5 (transactions version 2, broker/txn/tv2.py): the epoch bumped at every end;
        returns the producer id and epoch the producer goes on with."""
        self._check_coordinating(transactional_id)
        meta = self._txns.get(transactional_id)
        if meta is None:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING, f"no transactional id {transactional_id!r}")
        verdict = end_txn_verdict(meta, producer_id, producer_epoch, commit)
        if isinstance(verdict, Answered):
            return meta.producer_id, meta.producer_epoch
        next_id = await self._next_producer_id(meta) if epoch_exhausted(meta.producer_epoch) else -1
        state = TxnState.PREPARE_COMMIT if verdict.commit else TxnState.PREPARE_ABORT
        await self._write(meta, state, meta.partitions, _now_ms() if verdict.empty else meta.start_ms,
                          epoch=meta.producer_epoch + 1, complete=verdict.commit, next_producer_id=next_id,
                          client_transaction_version=TV2)
        return (next_id, 0) if next_id >= 0 else (meta.producer_id, meta.producer_epoch)

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
        # EndTxn below v5 ends the transaction at transactions version 0 whatever added its partitions (a
        # Produce v12 adds at version 2), as Kafka's KafkaApis passes it: no epoch bump, version 0 markers
        await self._write(meta, preparing, meta.partitions, meta.start_ms, epoch=meta.producer_epoch, complete=commit,
                          client_transaction_version=TV0)

    # --- state changes ---------------------------------------------------------------------------

    async def _write(self, meta: TxnMetadata, state: TxnState, partitions: set[TopicPartitionKey], start_ms: int,
                     *, epoch: int, new: bool = False, complete: bool | None = None, completing: bool = False,
                     **changes: int) -> None:
        """Write the id's next state (`changes`: other fields of TxnMetadata), take it in memory and,
        for a Prepare state, start its completion (`complete`: commit or not). One uncancellable unit:
        a client that goes mid-write leaves no state logged but not held, nor a Prepare with no markers.
        One write per id at a time: the id is claimed here, before the unit's task first runs, so a
        second request checked in that gap is refused rather than written over the first (which left
        the id pending for good, and the first write's partitions lost). Only the id's own completion
        (`completing`) writes while the id is pending."""
        if meta.pending and not completing:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS, f"{meta.transactional_id!r} is changing state")
        was_pending, meta.pending = meta.pending, True
        await run_to_completion(self._write_unit(meta, state, partitions, start_ms, was_pending, epoch=epoch,
                                                 new=new, complete=complete, **changes))

    async def _write_unit(self, meta: TxnMetadata, state: TxnState, partitions: set[TopicPartitionKey],
                          start_ms: int, was_pending: bool, *, epoch: int, new: bool, complete: bool | None,
                          **changes: int) -> None:
        """_write's body. The id is pending meanwhile, and as before after (then pending until
        Complete if a completion starts)."""
        try:
            after = dataclasses.replace(meta, state=state, partitions=set(partitions), start_ms=start_ms,
                                        producer_epoch=epoch, update_ms=_now_ms(), pending=False)
            for name, value in changes.items():  # producer ids and the client's transaction version
                setattr(after, name, value)
            if epoch != meta.producer_epoch or after.producer_id != meta.producer_id:
                after.last_producer_epoch = meta.producer_epoch
            await self._append(after)
        finally:
            meta.pending = was_pending
        for name in _WRITTEN_FIELDS:
            setattr(meta, name, getattr(after, name))
        if new:
            if self.in_cluster and self.not_served(meta.transactional_id) is not None:
                raise TxnError(ErrorCode.NOT_COORDINATOR, "the id's partition moved while its state was written")
            self._txns[meta.transactional_id] = meta
        if complete is not None:
            self._completions.start(meta, complete)

    async def _append(self, after: TxnMetadata) -> None:
        index = self.partition_of(after.transactional_id)
        record = (key_bytes(after.transactional_id), value_bytes(after, value_version(self.transaction_version)))
        [(error, message)] = (await append_state(self.replicas, {index: [record]}, after.update_ms)).values()
        if error != ErrorCode.NONE:
            code = _COORDINATOR_ERRORS.get(error, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            log.warning("transaction state write failed", transactional_id=after.transactional_id,
                        error=error.name, answered=code.name, reason=message)
            raise TxnError(code, message or "")

    async def _fence_and_abort(self, meta: TxnMetadata) -> None:
        """Abort the open transaction under a bumped epoch (its producer is fenced by it), at the
        cluster's transaction version as Kafka does (not the client's): from version 2 an exhausted
        epoch still bumps, and the id moves to a new producer id once the markers are written."""
        if self.transaction_version >= TV2:
            next_id = await self._next_producer_id(meta) if epoch_exhausted(meta.producer_epoch) else -1
            await self._write(meta, TxnState.PREPARE_ABORT, meta.partitions, meta.start_ms,
                              epoch=meta.producer_epoch + 1, complete=False, next_producer_id=next_id,
                              client_transaction_version=self.transaction_version)
        else:
            epoch = meta.producer_epoch if epoch_exhausted(meta.producer_epoch) else meta.producer_epoch + 1
            await self._write(meta, TxnState.PREPARE_ABORT, meta.partitions, meta.start_ms, epoch=epoch,
                              complete=False, client_transaction_version=self.transaction_version)

    async def _abort_timed_out_periodically(self) -> None:
        await every(self.settings.abort_timed_out_cleanup_interval_ms, lambda: self.abort_timed_out(),
                    log, "aborting timed-out transactions failed")

    async def abort_timed_out(self, now_ms: int | None = None) -> int:
        """Abort, with the epoch bumped, every transaction open longer than its timeout; returns how many
        it set out to abort."""
        now = _now_ms() if now_ms is None else now_ms
        expired = [m for m in self._txns.values()
                   if m.state == TxnState.ONGOING and not m.pending and now > m.start_ms + m.timeout_ms]
        aborting = 0
        for meta in expired:
            if meta.pending or meta.state != TxnState.ONGOING:
                continue  # changed while an earlier one was aborted (its producer ended it meanwhile)
            aborting += 1
            log.info("aborting a timed-out transaction", transactional_id=meta.transactional_id,
                     producer_id=meta.producer_id, epoch=meta.producer_epoch)
            try:
                await self._fence_and_abort(meta)
            except TxnError as exc:
                log.warning("cannot abort timed-out transaction yet", transactional_id=meta.transactional_id,
                            error=exc.message)
        return aborting

    async def remove_expired(self, now_ms: int | None = None) -> int:
        """Forget the ids without a transaction whose last change is `transactional.id.expiration.ms`
        old, as Kafka does (broker/txn/expiry.py)."""
        horizon = (_now_ms() if now_ms is None else now_ms) - self.settings.transactional_id_expiration_ms
        removed = await remove_expired_ids(self.replicas, self._txns, self.partition_of, self._owns, horizon,
                                           _now_ms())
        if removed:
            log.info("removed expired transactional ids", removed=removed)
        return removed
