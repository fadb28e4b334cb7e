"""TxnOffsetCommit's verification (broker/handlers/k28_txn_offset_commit.py) goes through Produce's
verifier (broker/txn/verification.py) at every version, and its refusals are answered in the codes
Kafka 4.3.1's group coordinator answers: AddPartitionsToTxnManager's verdict (PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE as INVALID_TXN_STATE below v4), then
CoordinatorOperationExceptionHelper's wording (an unreachable coordinator's NETWORK_EXCEPTION as
COORDINATOR_LOAD_IN_PROGRESS, a lost offsets partition as NOT_COORDINATOR), which the Java
TxnOffsetCommitHandler retries, not Produce's NOT_ENOUGH_REPLICAS, which it treats as fatal.

The id's transaction coordinator on another broker is faked at the verifier's boundary (its peer
connections), so that every answer it may give can be had; a real one answers in
tests/cluster/test_transactions_cluster.py, and one node's answers are compared with Kafka in
tests/differential/test_txn_offset_commit_verification_against_kafka.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.group import OffsetCommit
from broker.handlers import k28_txn_offset_commit as handler
from broker.replica import PartitionError
from broker.replica.producer_state import OPEN_TRANSACTION_ONLY
from broker.txn.state_log import TRANSACTION_STATE_TOPIC
from broker.txn.verification import TxnVerifier
from protocol.errors import ErrorCode
from protocol.messages import AddPartitionsToTxnResponse, TxnOffsetCommitRequest

OFFSETS_PARTITION = ("__consumer_offsets", 3)
NEW_GUARD = object()
_Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
_TopicResult = _Result.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult


class Producers:
    def __init__(self, open_here: bool) -> None:
        self.open_here = open_here

    def start_verification(self, producer_id: int, producer_epoch: int, sequence: int, epoch_bump: bool) -> object:
        return OPEN_TRANSACTION_ONLY if self.open_here else NEW_GUARD


class OffsetsPartition:
    def __init__(self, leading: bool, open_here: bool) -> None:
        self.leading = leading
        self.producers_loaded = True
        self.producers = Producers(open_here)

    def check_leader(self) -> None:
        if not self.leading:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader")


class Peers:
    """The connections to the id's transaction coordinator, broker 2: AddPartitionsToTxn answered with
    `says` for every partition, or unreachable."""

    def __init__(self, says: ErrorCode | None) -> None:
        self.says = says
        self.asked: list[tuple[int, int, bool]] = []  # (broker, version, verify_only)

    async def request(self, node: int, request, version: int):
        self.asked.append((node, version, request.transactions[0].verify_only))
        if self.says is None:
            raise ConnectionError("broker 2 is out of reach")
        return AddPartitionsToTxnResponse(results_by_transaction=[_Result(
            transactional_id=request.transactions[0].transactional_id, topic_results=[_TopicResult(
                name=t.name, results_by_partition=[_PartitionResult(partition_index=p, partition_error_code=self.says)
                                                   for p in t.partitions]) for t in request.transactions[0].topics])])


class Offsets:
    def __init__(self) -> None:
        self.guards: list[object] = []

    async def commit(self, *args, verification_guard: object, **kwargs) -> list[ErrorCode]:
        self.guards.append(verification_guard)
        return [ErrorCode.NONE]


def _broker(says: ErrorCode | None, leading: bool = True, open_here: bool = False,
            verification: bool = True) -> SimpleNamespace:
    """A group coordinator (broker 1) whose offsets partition's transaction coordinator is broker 2."""
    replicas = SimpleNamespace(partition=lambda topic, index: OffsetsPartition(leading, open_here))
    state_topic = SimpleNamespace(leader=lambda index: 2)
    topics = SimpleNamespace(get=lambda name: state_topic if name == TRANSACTION_STATE_TOPIC else None)
    peers = Peers(says)
    verifier = TxnVerifier(replicas, topics, peers, 1, lambda _: 0, None, None, lambda _: False)  # type: ignore[arg-type]
    store = SimpleNamespace(topic_exists=lambda: True, partition_for=lambda group: OFFSETS_PARTITION[1])
    return SimpleNamespace(groups=SimpleNamespace(store=store, offsets=Offsets()), peers=peers,
                           transactions=SimpleNamespace(coordinating=True, verifier=verifier,
                                                        verifies=lambda adds: adds or verification))


async def _answer(broker: SimpleNamespace, version: int = 5) -> ErrorCode:
    body = TxnOffsetCommitRequest(transactional_id="t", group_id="g", producer_id=7, producer_epoch=2)
    [code] = await handler._commit(broker, body, version, [OffsetCommit("t", 0, 10, -1, None)])  # type: ignore[arg-type]
    return code


@pytest.mark.parametrize(("says", "answered"), [
    (None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),  # unreachable: NETWORK_EXCEPTION, worded by the group coordinator
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
    (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR),
    (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.CONCURRENT_TRANSACTIONS),
    (ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.TRANSACTION_ABORTABLE),
    (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH),
    (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
])
async def test_the_implicit_adds_refusal_is_answered_as_kafkas_group_coordinator(says, answered):
    broker = _broker(says)
    assert await _answer(broker) == answered
    assert broker.peers.asked[0] == (2, 5, False)  # v5: the coordinator is asked to add the partition


async def test_v5_answers_concurrent_transactions_at_once():
    """Kafka retries the coordinator's CONCURRENT_TRANSACTIONS for Produce v12 only (its ReplicaManager's
    Produce path); its group coordinator answers it, and the producer retries the TxnOffsetCommit."""
    broker = _broker(ErrorCode.CONCURRENT_TRANSACTIONS)
    assert await _answer(broker, 5) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert broker.peers.asked == [(2, 5, False)]


@pytest.mark.parametrize(("version", "answered"), [
    (0, ErrorCode.INVALID_TXN_STATE), (3, ErrorCode.INVALID_TXN_STATE), (4, ErrorCode.TRANSACTION_ABORTABLE)])
async def test_v0_4_ask_a_coordinator_on_another_broker(version, answered):
    """The group not in the producer's transaction, as the coordinator on broker 2 says (verify-only, v4)."""
    broker = _broker(ErrorCode.TRANSACTION_ABORTABLE)
    assert await _answer(broker, version) == answered
    assert broker.peers.asked == [(2, 4, True)]
    assert broker.groups.offsets.guards == []  # nothing written


async def test_v0_4_write_with_the_guard_once_verified():
    broker = _broker(ErrorCode.NONE)
    assert await _answer(broker, 3) == ErrorCode.NONE
    assert broker.groups.offsets.guards == [NEW_GUARD]


@pytest.mark.parametrize("version", [0, 4, 5])
async def test_a_transaction_open_on_the_offsets_partition_is_not_asked_about(version):
    broker = _broker(ErrorCode.TRANSACTION_ABORTABLE, open_here=True)
    assert await _answer(broker, version) == ErrorCode.NONE
    assert broker.peers.asked == []
    assert broker.groups.offsets.guards == [OPEN_TRANSACTION_ONLY]  # a marker written meanwhile refuses it


async def test_verification_off_asks_below_v5_only():
    """`transaction.partition.verification.enable=false`: no check and no guard below v5, as Kafka."""
    broker = _broker(ErrorCode.TRANSACTION_ABORTABLE, verification=False)
    assert await _answer(broker, 4) == ErrorCode.NONE
    assert broker.peers.asked == [] and broker.groups.offsets.guards == [None]
    assert await _answer(broker, 5) == ErrorCode.TRANSACTION_ABORTABLE


async def test_lost_leadership_of_the_offsets_partition_is_not_coordinator():
    assert await _answer(_broker(ErrorCode.NONE, leading=False)) == ErrorCode.NOT_COORDINATOR
