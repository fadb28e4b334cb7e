"""InitProducerId (key 22), versions 0-5.

Idempotent producers (TransactionalId null; kafka-python 3 with acks=all, librdkafka with
enable.idempotence) get a new producer id with epoch 0 on every call, as Kafka does for them (a v3+
request's ProducerId/ProducerEpoch are only checked for shape: both -1 or both set, else
INVALID_REQUEST). Ids come from blocks claimed in the metadata store, so none is handed out twice,
across restarts included (broker/replica/producer_ids.py).

A transactional producer (a non-empty TransactionalId) is served by the transaction coordinator
(broker/txn/coordinator.py): a new id gets a producer id at epoch 0; a known one keeps its producer id
with the epoch bumped, which fences older instances; an open transaction is aborted first and the
request answered CONCURRENT_TRANSACTIONS (the client retries). TransactionTimeoutMs outside
(0, transaction.max.timeout.ms]: INVALID_TRANSACTION_TIMEOUT; a v3+ ProducerId/ProducerEpoch that
are not the id's current (or previous) ones: PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4).
An empty TransactionalId is INVALID_REQUEST, as in Kafka. In a cluster only the leader of the id's
`__transaction_state` partition answers it (NOT_COORDINATOR elsewhere, COORDINATOR_LOAD_IN_PROGRESS
while that partition is replayed after a leadership move).

Errors: NONE, INVALID_REQUEST, TRANSACTIONAL_ID_AUTHORIZATION_FAILED (also: no WRITE on the
transactional id, with an authorizer), CLUSTER_AUTHORIZATION_FAILED, INVALID_TRANSACTION_TIMEOUT,
CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS (the store could not hand out a block; retriable).
"""

from __future__ import annotations

import structlog

from broker.cluster.store import StoreError
from broker.handlers import BrokerContext, handles
from broker.replica.producer_ids import ProducerIdsExhausted
from broker.request_context import RequestContext
from broker.security.access import allowed, allowed_on_cluster
from broker.txn import TxnError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import InitProducerIdRequest, InitProducerIdResponse

log = structlog.get_logger("init_producer_id")

API_KEY = ApiKey.INIT_PRODUCER_ID
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def _error(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=NO_PRODUCER_ID,
                                  producer_epoch=NO_PRODUCER_EPOCH)


@handles(API_KEY, "0-5")
async def init_producer_id(broker: BrokerContext, request: Request[InitProducerIdRequest],
                           connection: RequestContext) -> InitProducerIdResponse:
    body = request.body
    if body.transactional_id is not None:
        return await _transactional(broker, request, connection)
    if request.api_version >= 3 and (body.producer_id == NO_PRODUCER_ID) != (body.producer_epoch == NO_PRODUCER_EPOCH):
        return _error(ErrorCode.INVALID_REQUEST)
    authorizer = broker.authorizer  # an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE somewhere
    if authorizer is not None and not allowed_on_cluster(broker, connection, Operation.IDEMPOTENT_WRITE) and \
            not authorizer.allows_some(connection.principal, connection.client_host, Operation.WRITE,
                                       ResourceType.TOPIC):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    producer_ids = broker.replicas.producer_ids
    assert producer_ids is not None  # made when the replicas start, before any request is served
    try:
        producer_id = await producer_ids.next_id()
    except (StoreError, ProducerIdsExhausted) as exc:
        log.error("cannot hand out a producer id", error=repr(exc))
        return _error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id,
                                  producer_epoch=0)


async def _transactional(broker: BrokerContext, request: Request[InitProducerIdRequest],
                         connection: RequestContext) -> InitProducerIdResponse:
    body, version = request.body, request.api_version
    transactional_id = body.transactional_id
    assert transactional_id is not None  # the caller's test
    if transactional_id == "":
        return _error(ErrorCode.INVALID_REQUEST)
    if not allowed(broker, connection, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    coordinator = broker.transactions
    producer_id = body.producer_id if version >= 3 else NO_PRODUCER_ID
    producer_epoch = body.producer_epoch if version >= 3 else NO_PRODUCER_EPOCH
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _error(ErrorCode.INVALID_REQUEST)
    try:
        producer_id, producer_epoch = await coordinator.init_producer_id(
            transactional_id, body.transaction_timeout_ms, producer_id, producer_epoch)
    except TxnError as exc:
        code = exc.error_code
        if code == ErrorCode.PRODUCER_FENCED and version < 4:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        log.info("InitProducerId refused", transactional_id=transactional_id, error=ErrorCode(code).name,
                 reason=exc.message)
        return _error(code)
    except (StoreError, ProducerIdsExhausted) as exc:
        log.error("cannot hand out a producer id", error=repr(exc))
        return _error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id,
                                  producer_epoch=producer_epoch)
