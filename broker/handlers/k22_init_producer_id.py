"""InitProducerId (key 22), versions 0-5.

Idempotent producers (TransactionalId null; kafka-python 3 with acks=all, librdkafka with
enable.idempotence) get a new producer id with epoch 0 on every call, as Kafka does for them (a v3+
request's ProducerId/ProducerEpoch are only checked for shape: both -1 or both set, else
INVALID_REQUEST). Ids come from blocks claimed in the metadata store, so none is handed out twice,
across restarts included (broker/replica/producer_ids.py).

Transactions are not supported: a non-empty TransactionalId gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
which every client treats as fatal (no retry loop) and reports with the transactional id in the
message; an empty one is INVALID_REQUEST, as in Kafka.

Errors: NONE, INVALID_REQUEST, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, COORDINATOR_LOAD_IN_PROGRESS
(the store could not hand out a block; retriable).
"""

from __future__ import annotations

import structlog

from broker.cluster.store import StoreError
from broker.handlers import BrokerContext, handles
from broker.replica.producer_ids import ProducerIdsExhausted
from broker.security.access import allowed_on_cluster
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
async def init_producer_id(broker: BrokerContext, request: Request[InitProducerIdRequest]) -> InitProducerIdResponse:
    body = request.body
    if body.transactional_id is not None:
        if body.transactional_id == "":
            return _error(ErrorCode.INVALID_REQUEST)
        log.info("transactional producer refused: transactions are not supported",
                 transactional_id=body.transactional_id, client_id=request.header.client_id)
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if request.api_version >= 3 and (body.producer_id == NO_PRODUCER_ID) != (body.producer_epoch == NO_PRODUCER_EPOCH):
        return _error(ErrorCode.INVALID_REQUEST)
    authorizer = broker.authorizer  # an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE somewhere
    if authorizer is not None and not allowed_on_cluster(broker, request, Operation.IDEMPOTENT_WRITE) and \
            not authorizer.allows_some(request.principal, request.client_host, Operation.WRITE, ResourceType.TOPIC):
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
