"""AddOffsetsToTxn (key 25), versions 0-4: a transactional producer is about to commit a consumer
group's offsets in its transaction; the group's `__consumer_offsets` partition joins the
transaction (as AddPartitionsToTxn adds a partition), so the coordinator's marker reaches it and
settles the offsets TxnOffsetCommit writes there.

Errors: NONE, INVALID_REQUEST (empty transactional id), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
GROUP_AUTHORIZATION_FAILED, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
before v2), CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from broker.group import GroupError
from broker.group.offsets_store import OFFSETS_TOPIC
from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from broker.txn import TxnError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN


@handles(API_KEY, "0-4")
async def add_offsets_to_txn(broker: BrokerContext,
                             request: Request[AddOffsetsToTxnRequest],
                             connection: RequestContext) -> AddOffsetsToTxnResponse:
    body, version = request.body, request.api_version

    def answer(code: ErrorCode) -> AddOffsetsToTxnResponse:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)

    if not body.transactional_id:
        return answer(ErrorCode.INVALID_REQUEST)
    if not allowed(broker, connection, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(broker, connection, Operation.READ, ResourceType.GROUP, body.group_id):
        return answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    store = broker.groups.store
    try:
        await store.ensure_topic()
        await broker.transactions.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch,
                                                 {(OFFSETS_TOPIC, store.partition_for(body.group_id))})
    except (TxnError, GroupError) as exc:
        code = exc.error_code
        if code == ErrorCode.PRODUCER_FENCED and version < 2:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return answer(code)
    return answer(ErrorCode.NONE)
