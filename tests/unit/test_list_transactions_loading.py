"""ListTransactions while a `__transaction_state` partition led here is loading: Kafka 4.3.1's
TransactionStateManager.listTransactionStates answers COORDINATOR_LOAD_IN_PROGRESS (before it looks
at the filters), never a partial list."""

from __future__ import annotations

from types import SimpleNamespace

from broker.handlers.k66_list_transactions import list_transactions
from broker.request_context import RequestContext
from broker.txn.state_log import TxnMetadata, TxnState
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ListTransactionsRequest


def _request(pattern: str | None = None) -> Request:
    body = ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=-1,
                                   transactional_id_pattern=pattern)
    return Request(header=None, api_key=66, api_version=2, correlation_id=1, body=body)  # type: ignore[arg-type]


async def test_a_partition_loading_answers_load_in_progress() -> None:
    loading: dict = {}
    coordinator = SimpleNamespace(active=True, partitions=SimpleNamespace(loading=loading),
                                  all=lambda: [TxnMetadata("loaded", 7, 0, 60_000, TxnState.ONGOING, start_ms=1)])
    broker = SimpleNamespace(transactions=coordinator, authorizer=None)
    loading[3] = object()  # partition 3 is being replayed
    answer = await list_transactions(broker, _request(), RequestContext())  # type: ignore[arg-type]
    assert answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and answer.transaction_states == []
    answer = await list_transactions(broker, _request("(unclosed"), RequestContext())  # type: ignore[arg-type]
    assert answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # Kafka: loading is checked first
    loading.clear()
    answer = await list_transactions(broker, _request(), RequestContext())  # type: ignore[arg-type]
    assert answer.error_code == ErrorCode.NONE
    assert [s.transactional_id for s in answer.transaction_states] == ["loaded"]
