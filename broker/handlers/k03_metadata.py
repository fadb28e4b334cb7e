"""Metadata (key 3), versions 0-13.

Lists the alive brokers and the controller (on one broker: itself), the cluster id (v2+) and the
requested topics with their ids (v10+), partitions, leader, leader epoch (v7+, from the partition
state), replicas and ISR. One broker: it leads everything, and offline replicas (v5+) hold it for a
partition whose log is offline. In a cluster: the leader and ISR of the partition state, leader -1
with LEADER_NOT_AVAILABLE while the partition has no alive leader, offline replicas are the
replicas whose broker is not registered.

Which topics: v0 an empty list means all; v1+ null means all and [] none. From v12 a topic may be
asked for by id (name null): known ids are answered by name, unknown ones with UNKNOWN_TOPIC_ID and a
null name; when any id is given, names in the same request are ignored (as in Kafka). v10 and v11
must not use ids: a null name or a non-zero id there is INVALID_REQUEST.

Auto-creation, as Kafka does it: a missing topic asked for by name is created with num.partitions and
default.replication.factor when the request allows it (allow_auto_topic_creation, v4+; always in
v0-3) and auto.create.topics.enable is true. Creation on one broker is immediate, so the answer
already describes the new topic. Internal topics (__consumer_offsets, ...) are never auto-created
here (their owners create them); an invalid name gets INVALID_TOPIC_EXCEPTION whether or not creation
is allowed.

With an authorizer, the topics a client may not DESCRIBE are left out of an all-topics answer; named,
they are TOPIC_AUTHORIZATION_FAILED (by id, UNKNOWN_TOPIC_ID); auto-creation needs CREATE on the cluster
or the topic, and is charged to the client's controller_mutation_rate strictly (Kafka's broker forwards
it to its controller as a CreateTopics in the client's name): over the quota the topic stays unknown
(UNKNOWN_TOPIC_OR_PARTITION), the answer unthrottled. Authorized operations (v8+): INT32_MIN unless
requested, then the operations the caller may do on the topic and on the cluster (all of them without an
authorizer). v13 adds a top-level error code, always NONE unless the request is invalid.

Errors: NONE, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
INVALID_TOPIC_EXCEPTION, INVALID_REQUEST, LEADER_NOT_AVAILABLE (partition log offline), and whatever
auto-creation fails with (INVALID_REPLICATION_FACTOR, INVALID_PARTITIONS, ...).
"""

from __future__ import annotations

import uuid

import structlog

from broker.handlers import BrokerContext, handles
from broker.handlers.acl_operations import (
    NOT_REQUESTED,
    TOPIC_OPERATIONS,
    authorized,
    authorized_on_cluster,
)
from broker.handlers.cluster_view import alive_brokers, controller_id, offline_logs, partition_views
from broker.quotas.mutations import ThrottlingQuotaExceeded
from broker.request_context import RequestContext
from broker.security.access import allowed, allowed_on_cluster
from broker.topic import INTERNAL_TOPICS, validate_topic_name
from broker.topic_placement import TopicError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import MetadataRequest, MetadataResponse

log = structlog.get_logger("metadata")

API_KEY = ApiKey.METADATA
ZERO_UUID = uuid.UUID(int=0)
TopicResult = MetadataResponse.MetadataResponseTopic
PartitionResult = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition


@handles(API_KEY, "0-13")
async def metadata(broker: BrokerContext, request: Request[MetadataRequest],
                   connection: RequestContext) -> MetadataResponse:
    version, body = request.api_version, request.body
    response = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                 for b in alive_brokers(broker, connection.listener_name)],
        cluster_id=broker.cluster_id,
        controller_id=controller_id(broker),
        cluster_authorized_operations=authorized_on_cluster(
            broker, connection, version >= 8 and body.include_cluster_authorized_operations),
    )
    include_ops = version >= 8 and body.include_topic_authorized_operations

    def may(operation: Operation, name: str) -> bool:
        return allowed(broker, connection, operation, ResourceType.TOPIC, name)
    requested = body.topics
    if requested is not None and 10 <= version < 12:
        for wanted in requested:
            if wanted.name is None or wanted.topic_id != ZERO_UUID:
                return _invalid_request(response, requested, version,
                                        f"Topic ids are not supported in Metadata v{version}")
    if requested is None or (version == 0 and not requested):
        offline = offline_logs(broker)
        response.topics = [_describe(broker, connection, topic, include_ops, offline) for topic in broker.topics.all()
                           if may(Operation.DESCRIBE, topic.name)]  # others stay unseen
        return response
    ids = [t.topic_id for t in requested if version >= 10 and t.topic_id != ZERO_UUID]
    if ids:
        for topic_id in dict.fromkeys(ids):
            topic = broker.topics.by_id(topic_id)
            if topic is None or not may(Operation.DESCRIBE, topic.name):
                response.topics.append(TopicResult(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                                   topic_id=topic_id, topic_authorized_operations=NOT_REQUESTED))
            else:
                response.topics.append(_describe(broker, connection, topic, include_ops))
        return response
    if any(t.name is None for t in requested):
        return _invalid_request(response, requested, version, "A topic has neither a name nor an id")
    allow_create = (version < 4 or body.allow_auto_topic_creation) and broker.config.auto_create_topics_enable
    may_create_any = allowed_on_cluster(broker, connection, Operation.CREATE)
    for name in dict.fromkeys(t.name for t in requested if t.name is not None):  # all are, as checked above
        topic = broker.topics.get(name)
        if not may(Operation.DESCRIBE, name) or (topic is None and allow_create and not may_create_any
                                                 and not may(Operation.CREATE, name)):
            # as Kafka: no operations reported for a topic the caller may not see (nor an unknown id)
            response.topics.append(TopicResult(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                               is_internal=name in INTERNAL_TOPICS,
                                               topic_authorized_operations=NOT_REQUESTED))
            continue
        if topic is None:
            error = await _missing(broker, name, allow_create, connection, request.header.client_id)
            topic = broker.topics.get(name) if error == ErrorCode.NONE else None
            if topic is None:
                response.topics.append(TopicResult(error_code=error, name=name, is_internal=name in INTERNAL_TOPICS,
                                                   topic_authorized_operations=_operations(broker, connection, name,
                                                                                           include_ops)))
                continue
        response.topics.append(_describe(broker, connection, topic, include_ops))
    return response


async def _missing(broker: BrokerContext, name: str, allow_create: bool, connection: RequestContext,
                   client_id: str | None) -> ErrorCode:
    """The error for a topic that does not exist, creating it first when allowed. Its partitions are
    charged to the client's controller_mutation_rate, strictly, as Kafka's controller charges the
    creation the broker forwards for it; refused, the topic stays unknown (what Kafka answers
    meanwhile), and the answer is not throttled."""
    try:
        validate_topic_name(name)
    except TopicError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if not allow_create or name in INTERNAL_TOPICS:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        await broker.topics.create(name, -1, -1, charge=broker.quotas.mutations.for_client(connection, client_id,
                                                                                           strict=True).charge)
    except ThrottlingQuotaExceeded:
        log.info("auto-creation over the client's controller mutation quota", topic=name, client_id=client_id)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except TopicError as exc:
        if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return ErrorCode.NONE if broker.topics.get(name) else ErrorCode.LEADER_NOT_AVAILABLE
        log.warning("auto-creation failed", topic=name, error=exc.error_code.name, message=exc.message)
        return exc.error_code
    log.info("auto-created topic", topic=name)
    return ErrorCode.NONE


def _describe(broker: BrokerContext, connection: RequestContext, topic, include_ops: bool, offline=None) -> TopicResult:
    partitions = [PartitionResult(error_code=p.error_code, partition_index=p.partition, leader_id=p.leader,
                                  leader_epoch=p.leader_epoch, replica_nodes=p.replicas, isr_nodes=p.isr,
                                  offline_replicas=p.offline)
                  for p in partition_views(broker, topic, offline_logs(broker) if offline is None else offline)]
    return TopicResult(error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=topic.internal,
                       partitions=partitions, topic_authorized_operations=_operations(broker, connection, topic.name,
                                                                                     include_ops))


def _operations(broker: BrokerContext, connection: RequestContext, name: str, include_ops: bool) -> int:
    return authorized(broker, connection, ResourceType.TOPIC, name, TOPIC_OPERATIONS) if include_ops else NOT_REQUESTED


def _invalid_request(response: MetadataResponse, requested, version: int, message: str) -> MetadataResponse:
    """Kafka's MetadataRequest.getErrorResponse: every requested topic carries the error, no brokers."""
    log.info("invalid metadata request", version=version, reason=message)
    response.brokers = []
    response.topics = [TopicResult(error_code=ErrorCode.INVALID_REQUEST, name=t.name if t.name is not None else "",
                                   topic_id=t.topic_id) for t in requested]
    response.error_code = ErrorCode.INVALID_REQUEST
    return response
