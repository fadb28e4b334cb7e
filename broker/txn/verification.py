"""KIP-890 on a partition leader: Produce's verification, and TxnOffsetCommit's of its offsets partition.

Kafka's AddPartitionsToTxnManager and ReplicaManager's transaction verification: before the first
transactional batch of a producer's new transaction is written on a partition, the leader asks the
id's coordinator (the leader of its `__transaction_state` partition, from the cluster metadata: no
FindCoordinator) with AddPartitionsToTxn v4, verify-only, whether the partition is in the
producer's open transaction; where that coordinator is this broker's own, it answers exactly as it
answers another leader's request (one rule). A batch that continues a transaction already open on
the partition (its producer's, at its epoch: Kafka's hasOngoingTransaction) is not asked about, but
presents OPEN_TRANSACTION_ONLY at the append, which lets it in only while that transaction is still
open there (Kafka's sentinel guard). The partition's verification guard
(ProducerStateManager.start_verification) is taken before asking and presented at the append: a
marker written meanwhile drops it, so a batch verified against a transaction that has since ended is
refused (INVALID_TXN_STATE, at every Produce version, as Kafka's UnifiedLog refuses it) rather than
opening a transaction no coordinator will close. A batch whose epoch is below the producer's here
is refused (INVALID_PRODUCER_EPOCH) without asking, and leaves no guard.

A producer on transactions version 2 (Produce v12, TxnOffsetCommit v5) adds no partitions itself:
the leader asks the coordinator to add them (AddPartitionsToTxn v5 with VerifyOnly false, or the
coordinator directly where it is this broker). For Produce CONCURRENT_TRANSACTIONS is asked again
for up to 100 ms (Kafka's add.partitions.to.txn.retry.backoff.max.ms, in its ReplicaManager's Produce
path only) and answered as is after that; TxnOffsetCommit answers it at once, as Kafka's group
coordinator does.

The coordinator's answers are mapped as Kafka's AddPartitionsToTxnManager maps them for both callers
(`verdict`): PRODUCER_FENCED to INVALID_PRODUCER_EPOCH, a refused CLUSTER_ACTION to INVALID_TXN_STATE,
and TRANSACTION_ABORTABLE too for clients that do not know it. Each caller then answers in its own
codes: Produce turns the retriable ones (CONCURRENT_TRANSACTIONS below v12, a coordinator moving,
loading or unreachable) into NOT_ENOUGH_REPLICAS, which clients retry without a metadata refresh
(`produce_error`); the group coordinator words them as it words its own write's errors
(broker/group/offsets_store.py coordinator_error).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog

from broker.replica import PartitionError, ReplicaManager
from broker.replica.producer_state import NO_SEQUENCE, OPEN_TRANSACTION_ONLY, ProducerStateError
from broker.txn.state_log import TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode
from protocol.messages import AddPartitionsToTxnRequest

if TYPE_CHECKING:
    from broker.txn.peers import PeerConnections
    from broker.txn.state_topic import TxnTopics

log = structlog.get_logger("transactions")

TopicPartitionKey = tuple[str, int]
VERIFY_VERSION = 4
_Transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
# The coordinator's own check, for a leader that is also the id's coordinator's broker.
LocalCheck = Callable[[str, int, int, list[TopicPartitionKey]], dict[TopicPartitionKey, ErrorCode]]
LocalAdd = Callable[[str, int, int, list[TopicPartitionKey]], Awaitable[dict[TopicPartitionKey, ErrorCode]]]
ADD_VERSION = 5
ADD_RETRY_BACKOFF_S = 0.02  # Kafka's add.partitions.to.txn.retry.backoff.ms
ADD_RETRY_MAX_S = 0.1  # and .max.ms

_RETRIABLE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.NOT_COORDINATOR})


def verdict(code: ErrorCode, abortable: bool = False) -> ErrorCode:
    """The coordinator's answer on one partition as Kafka's AddPartitionsToTxnManager hands it to both
    its callers, Produce and the group coordinator (`abortable`: the caller's client knows
    TRANSACTION_ABORTABLE, Kafka's genericError operation; else it is INVALID_TXN_STATE)."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED or (code == ErrorCode.TRANSACTION_ABORTABLE and not abortable):
        return ErrorCode.INVALID_TXN_STATE
    return code


def produce_error(code: ErrorCode, add: bool = False) -> ErrorCode:
    """What a Produce answers for a `verdict` (`add`: v12, where CONCURRENT_TRANSACTIONS is answered as is):
    the retriable ones become NOT_ENOUGH_REPLICAS, which older clients retry (Kafka's ReplicaManager)."""
    if add and code == ErrorCode.CONCURRENT_TRANSACTIONS:
        return code
    if code in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return code


class TxnVerifier:
    def __init__(self, replicas: ReplicaManager, topics: TxnTopics, peers: PeerConnections, node_id: int,
                 partition_of: Callable[[str], int], local_check: LocalCheck, local_add: LocalAdd,
                 coordinated_here: Callable[[str], bool]) -> None:
        self.replicas = replicas
        self.topics = topics
        self.peers = peers
        self.node_id = node_id
        self._partition_of = partition_of
        self._local_check = local_check
        self._local_add = local_add
        self._coordinated_here = coordinated_here

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartitionKey], *, add: bool = False, abortable: bool = False,
                     sequences: dict[TopicPartitionKey, int] | None = None, retry_concurrent: bool = False
                     ) -> tuple[dict[TopicPartitionKey, ErrorCode], dict[TopicPartitionKey, object]]:
        """(the partitions refused, with their `verdict` or why no guard was taken; the guards to present at
        the append). `add`: transactions version 2, the coordinator adds the partitions; `abortable`: see verdict;
        `sequences`: each batch's first sequence, which the guard remembers (none for a coordinator's offsets);
        `retry_concurrent`: CONCURRENT_TRANSACTIONS asked again for up to 100 ms (Produce v12 only, as Kafka)."""
        errors, guards = await self.take_guards(producer_id, producer_epoch, partitions, add, sequences)
        asked = [tp for tp, guard in guards.items() if guard is not OPEN_TRANSACTION_ONLY]
        if asked:
            answers = await self._ask_retrying(transactional_id, producer_id, producer_epoch, asked, add,
                                               retry_concurrent)
            for tp, code in answers.items():
                if code != ErrorCode.NONE and tp in asked:
                    errors[tp] = verdict(code, abortable)
                    log.info("transactional batch not verified", partition=f"{tp[0]}-{tp[1]}",
                             transactional_id=transactional_id, producer_id=producer_id, error=code.name)
        return errors, guards

    async def take_guards(self, producer_id: int, producer_epoch: int, partitions: list[TopicPartitionKey],
                          add: bool = False, sequences: dict[TopicPartitionKey, int] | None = None
                          ) -> tuple[dict[TopicPartitionKey, ErrorCode], dict[TopicPartitionKey, object]]:
        """Each partition's guard, taken before the coordinator is asked so that a marker written after
        its answer drops it (OPEN_TRANSACTION_ONLY where the transaction is open there already: not
        asked about); the refused partitions (not led here, a fenced epoch) with their error."""
        errors: dict[TopicPartitionKey, ErrorCode] = {}
        guards: dict[TopicPartitionKey, object] = {}
        for tp in partitions:
            try:
                partition = self.replicas.partition(*tp)
                partition.check_leader()
                if not partition.producers_loaded:
                    await partition.load_producer_state()
            except PartitionError as exc:
                errors[tp] = ErrorCode(exc.error_code)
                continue
            sequence = sequences.get(tp, NO_SEQUENCE) if sequences is not None else NO_SEQUENCE
            try:
                guard = partition.producers.start_verification(producer_id, producer_epoch, sequence, epoch_bump=add)
            except ProducerStateError as exc:  # a fenced epoch: not asked about
                errors[tp] = ErrorCode(exc.error_code)
                continue
            guards[tp] = guard
        return errors, guards

    async def _ask_retrying(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            partitions: list[TopicPartitionKey], add: bool,
                            retry: bool) -> dict[TopicPartitionKey, ErrorCode]:
        deadline = time.monotonic() + ADD_RETRY_MAX_S
        while True:
            answers = await self._ask(transactional_id, producer_id, producer_epoch, partitions, add)
            if not retry or ErrorCode.CONCURRENT_TRANSACTIONS not in answers.values() or time.monotonic() >= deadline:
                return answers
            await asyncio.sleep(ADD_RETRY_BACKOFF_S)

    async def _ask(self, transactional_id: str, producer_id: int, producer_epoch: int,
                   partitions: list[TopicPartitionKey], add: bool) -> dict[TopicPartitionKey, ErrorCode]:
        """The coordinator's verdict per partition (only the refused ones need be named)."""
        if self._coordinated_here(transactional_id):
            leader = self.node_id  # this broker's coordinator answers as it answers another leader's request
        else:
            state = self.topics.get(TRANSACTION_STATE_TOPIC)
            leader = state.leader(self._partition_of(transactional_id)) if state is not None else -1
        if leader < 0:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if leader == self.node_id:
            if add:
                return await self._local_add(transactional_id, producer_id, producer_epoch, partitions)
            return self._local_check(transactional_id, producer_id, producer_epoch, partitions)
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = AddPartitionsToTxnRequest(transactions=[_Transaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=not add, topics=[_Transaction.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                      for t, ps in by_topic.items()])])
        try:
            answer = await self.peers.request(leader, request, ADD_VERSION if add else VERIFY_VERSION)
        except Exception as exc:  # unreachable, closed, timed out: the producer retries
            log.info("cannot ask the transaction coordinator", broker=leader, error=repr(exc))
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        if answer.error_code:
            return dict.fromkeys(partitions, ErrorCode(answer.error_code))
        return {(t.name, p.partition_index): ErrorCode(p.partition_error_code)
                for result in answer.results_by_transaction if result.transactional_id == transactional_id
                for t in result.topic_results for p in t.results_by_partition}
