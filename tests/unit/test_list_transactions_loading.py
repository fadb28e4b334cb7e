"""ListTransactions while a `__transaction_state` partition led here is loading: Kafka 4.3.1's
TransactionStateManager.listTransactionStates answers COORDINATOR_LOAD_IN_PROGRESS (before it looks
at the filters), never a partial list."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.handlers.k66_list_transactions import list_transactions
from broker.request_context import RequestContext
from broker.txn.state_log import TxnMetadata, TxnState
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ListTransactionsRequest
from tests.unit.fakes import request_of


def _request(pattern: str | None = None) -> Request[ListTransactionsRequest]:
    return request_of(ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=-1,
                                              transactional_id_pattern=pattern), 2)


@dataclass
class LoadingPartitions:
    """The coordinator's `__transaction_state` partitions: those being replayed, by index."""

    loading: dict[int, object] = field(default_factory=dict)


@dataclass
class FakeCoordinator:
    """What ListTransactions reads of the TransactionCoordinator."""

    held: list[TxnMetadata]
    partitions: LoadingPartitions = field(default_factory=LoadingPartitions)
    active: bool = True

    def all(self) -> list[TxnMetadata]:
        return self.held


@dataclass
class TxnBroker:
    transactions: FakeCoordinator
    authorizer: None = None


async def _list(broker: TxnBroker, request: Request[ListTransactionsRequest]):
    return await list_transactions(broker, request, RequestContext())


async def test_a_partition_loading_answers_load_in_progress() -> None:
    broker = TxnBroker(FakeCoordinator([TxnMetadata("loaded", 7, 0, 60_000, TxnState.ONGOING, start_ms=1)]))
    loading = broker.transactions.partitions.loading
    loading[3] = object()  # partition 3 is being replayed
    answer = await _list(broker, _request())
    assert answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and answer.transaction_states == []
    answer = await _list(broker, _request("(unclosed"))
    assert answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # Kafka: loading is checked first
    loading.clear()
    answer = await _list(broker, _request())
    assert answer.error_code == ErrorCode.NONE
    assert [s.transactional_id for s in answer.transaction_states] == ["loaded"]
