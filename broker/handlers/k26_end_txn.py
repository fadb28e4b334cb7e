"""EndTxn (key 26), versions 0-5: commit or abort the producer's open transaction. v5 is
transactions version 2 (KIP-890 part 2, broker/txn/tv2.py): the epoch is bumped at every end, the
markers carry the bumped epoch, and the answer carries the producer id and epoch to go on with (a
new producer id at epoch 0 when the epoch ran out); its retry and fencing rules are Kafka's table
in broker/txn/tv2.py. Refused answers carry producer id -1 and epoch -1, as Kafka's.

The transaction coordinator (broker/txn/coordinator.py) writes PrepareCommit or PrepareAbort to
`__transaction_state` and answers; the markers then go to every partition of the transaction, and
CompleteCommit/CompleteAbort is written after the last. A retried EndTxn of a completed transaction
with the same outcome is NONE; one that is still being completed, CONCURRENT_TRANSACTIONS; the
other outcome, or no open transaction, INVALID_TXN_STATE.

Errors: NONE, INVALID_REQUEST (empty transactional id), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), INVALID_TXN_STATE,
CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import structlog

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from broker.txn import TxnError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import EndTxnRequest, EndTxnResponse

log = structlog.get_logger("end_txn")

API_KEY = ApiKey.END_TXN


@handles(API_KEY, "0-5")
async def end_txn(broker: BrokerContext, request: Request[EndTxnRequest], connection: RequestContext) -> EndTxnResponse:
    body, version = request.body, request.api_version
    if not body.transactional_id:
        return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST)
    if not allowed(broker, connection, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    producer_id, producer_epoch = -1, -1
    try:
        if version >= 5:
            producer_id, producer_epoch = await broker.transactions.end_txn_v2(
                body.transactional_id, body.producer_id, body.producer_epoch, body.committed)
        else:
            await broker.transactions.end_txn(body.transactional_id, body.producer_id, body.producer_epoch,
                                              body.committed)
    except TxnError as exc:
        code = exc.error_code
        if code == ErrorCode.PRODUCER_FENCED and version < 2:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        log.info("EndTxn refused", transactional_id=body.transactional_id, error=ErrorCode(code).name,
                 reason=exc.message)
        return EndTxnResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id,
                          producer_epoch=producer_epoch)
