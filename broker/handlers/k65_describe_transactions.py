"""DescribeTransactions (key 65), version 0 (`kafka-transactions describe`).

Per transactional id, what the coordinator (broker/txn/coordinator.py) holds: Kafka's name of the
state, the timeout, the start time of the current (or last) transaction, the producer id and epoch,
and the partitions in the transaction — only of the topics the caller may DESCRIBE, as Kafka
filters them (KafkaApis.handleDescribeTransactionsRequest, TransactionCoordinator
.handleDescribeTransactions).

Errors, per id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED (no DESCRIBE on it), COORDINATOR_NOT_AVAILABLE
(the coordinator is not running: the broker is starting or stopping), INVALID_REQUEST (an empty id),
NOT_COORDINATOR (no `__transaction_state` yet, or in a cluster the id's partition is led elsewhere),
COORDINATOR_LOAD_IN_PROGRESS (in a cluster, its partition is being replayed here),
TRANSACTIONAL_ID_NOT_FOUND.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from broker.txn import TxnState
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
_State = DescribeTransactionsResponse.TransactionState
_Topic = _State.TopicData


def _failed(transactional_id: str, code: ErrorCode) -> _State:
    # Kafka leaves the other fields at their defaults: empty state name, zeros.
    return _State(error_code=code, transactional_id=transactional_id, transaction_state="",
                  transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0, producer_epoch=0, topics=[])


def _describe(broker: BrokerContext, connection: RequestContext, transactional_id: str) -> _State:
    if not allowed(broker, connection, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return _failed(transactional_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    coordinator = broker.transactions
    if not coordinator.active:
        return _failed(transactional_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not transactional_id:
        return _failed(transactional_id, ErrorCode.INVALID_REQUEST)
    refused = coordinator.not_served(transactional_id)
    if refused is not None:
        return _failed(transactional_id, refused)
    meta = coordinator.get(transactional_id)
    if meta is None or meta.state == TxnState.DEAD:  # a Dead id is being expired: Kafka hides it
        return _failed(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(index)
    return _State(
        error_code=ErrorCode.NONE, transactional_id=transactional_id, transaction_state=meta.state.display_name,
        transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
        topics=[_Topic(topic=topic, partitions=indexes) for topic, indexes in by_topic.items()
                if allowed(broker, connection, Operation.DESCRIBE, ResourceType.TOPIC, topic)])


@handles(API_KEY, "0")
async def describe_transactions(broker: BrokerContext, request: Request[DescribeTransactionsRequest],
                                connection: RequestContext
                                ) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
        _describe(broker, connection, tid) for tid in request.body.transactional_ids])
