"""TxnOffsetCommit v5's implicit add (broker/handlers/k28_txn_offset_commit.py): a failure of the
add is answered in the codes Kafka 4.3.1's group coordinator answers (its normalizeException), which
the Java TxnOffsetCommitHandler retries, not in Produce's codes, which it treats as fatal."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.group import OffsetCommit
from broker.handlers import k28_txn_offset_commit as handler
from broker.replica import PartitionError
from broker.txn.verification import TxnVerifier
from protocol.errors import ErrorCode
from protocol.messages import TxnOffsetCommitRequest

OFFSETS_PARTITION = ("__consumer_offsets", 3)


class Producers:
    def start_verification(self, producer_id: int, producer_epoch: int, sequence: int, epoch_bump: bool) -> object:
        return object()


class OffsetsPartition:
    def __init__(self, leading: bool) -> None:
        self.leading = leading
        self.producers_loaded = True
        self.producers = Producers()

    def check_leader(self) -> None:
        if not self.leading:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader")


def _broker(coordinator_says: ErrorCode, leading: bool = True) -> SimpleNamespace:
    async def ask(transactional_id, producer_id, producer_epoch, partitions, add):
        return dict.fromkeys(partitions, coordinator_says)

    replicas = SimpleNamespace(partition=lambda topic, index: OffsetsPartition(leading))
    verifier = TxnVerifier(replicas, None, None, 1, lambda _: 0, None, None, lambda _: False)  # type: ignore[arg-type]
    verifier._ask = ask  # type: ignore[method-assign]
    store = SimpleNamespace(topic_exists=lambda: True, partition_for=lambda group: OFFSETS_PARTITION[1])
    return SimpleNamespace(groups=SimpleNamespace(store=store),
                           transactions=SimpleNamespace(coordinating=True, verifier=verifier))


async def _answer(broker: SimpleNamespace, version: int = 5) -> ErrorCode:
    body = TxnOffsetCommitRequest(transactional_id="t", group_id="g", producer_id=7, producer_epoch=2)
    [code] = await handler._commit(broker, body, version, [OffsetCommit("t", 0, 10, -1, None)])  # type: ignore[arg-type]
    return code


@pytest.mark.parametrize(("coordinator_says", "answered"), [
    (ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.CONCURRENT_TRANSACTIONS),
    (ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.TRANSACTION_ABORTABLE),
    (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH),
    (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
])
async def test_the_implicit_adds_refusal_is_answered_as_kafkas_group_coordinator(coordinator_says, answered):
    assert await _answer(_broker(coordinator_says)) == answered


async def test_lost_leadership_of_the_offsets_partition_is_not_coordinator():
    assert await _answer(_broker(ErrorCode.NONE, leading=False)) == ErrorCode.NOT_COORDINATOR
