"""CreateTopics (key 19), versions 2-7.

Each topic is checked in Kafka's order: name (legal characters, length, '.'/'_' collision with an
existing topic), existence, configs (null values, unknown keys, bad values), then partitions and
replicas. NumPartitions and ReplicationFactor may be -1 for the broker's num.partitions and
default.replication.factor (KIP-464; accepted in every version, as Kafka brokers do — kafkajs sends -1
with v3). An explicit assignment needs both counts at -1, partitions numbered 0..n-1, and distinct,
registered brokers (only this one). With validate_only nothing is created, but the answer is what a
real creation would return. A name given more than once gets one INVALID_REQUEST result and is not
created. More than 10000 partitions in one request fails every topic with POLICY_VIOLATION (Kafka's
MAX_PARTITIONS_PER_BATCH). On one broker creation is immediate: the logs exist when the answer goes.

v5+ results carry the partition count, replication factor and every topic config with its value and
source (as DescribeConfigs); v7 the topic id. Failed topics carry an error message (v1+).

With an authorizer, a topic needs CREATE on the cluster or on itself (TOPIC_AUTHORIZATION_FAILED).
Its partitions are charged to the client's controller_mutation_rate once every check passed
(broker/quotas/mutations.py: refused from v6, throttled below).

Errors: NONE, THROTTLING_QUOTA_EXCEEDED (v6+), TOPIC_AUTHORIZATION_FAILED, TOPIC_ALREADY_EXISTS,
INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST, POLICY_VIOLATION.
"""

from __future__ import annotations

import uuid
from collections import Counter

import structlog

from broker.handlers import BrokerContext, handles
from broker.quotas.mutations import ThrottlingQuotaExceeded
from broker.request_context import RequestContext
from broker.security.access import allowed, allowed_on_cluster
from broker.topic_configs import describe_topic_configs
from broker.topic_placement import MAX_PARTITIONS_PER_REQUEST, TopicError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import CreateTopicsRequest, CreateTopicsResponse

log = structlog.get_logger("create_topics")

API_KEY = ApiKey.CREATE_TOPICS
Result = CreateTopicsResponse.CreatableTopicResult
ConfigResult = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs


@handles(API_KEY, "2-7")
async def create_topics(broker: BrokerContext, request: Request[CreateTopicsRequest],
                        connection: RequestContext) -> CreateTopicsResponse:
    version, body = request.api_version, request.body
    topics = body.topics
    if _requested_partitions(broker, topics) > MAX_PARTITIONS_PER_REQUEST:
        message = "Excessively large number of partitions per request."
        return CreateTopicsResponse(topics=[_failed(t.name, ErrorCode.POLICY_VIOLATION, message) for t in topics])
    counts = Counter(t.name for t in topics)
    results = []
    quota = broker.quotas.mutations.for_request(request, connection)
    may_create_any = allowed_on_cluster(broker, connection, Operation.CREATE)
    for wanted in topics:
        if counts[wanted.name] > 1:
            continue
        if not may_create_any and not allowed(broker, connection, Operation.CREATE, ResourceType.TOPIC, wanted.name):
            results.append(_failed(wanted.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   "CREATE on the cluster or the topic is needed to create it."))
            continue
        try:
            topic = await broker.topics.create(
                wanted.name, wanted.num_partitions, wanted.replication_factor,
                configs={c.name: c.value for c in wanted.configs},
                assignments=[(a.partition_index, list(a.broker_ids)) for a in wanted.assignments],
                validate_only=body.validate_only, charge=quota.charge)
        except (TopicError, ThrottlingQuotaExceeded) as exc:
            log.info("topic not created", topic=wanted.name, error=exc.error_code.name, message=exc.message)
            results.append(_failed(wanted.name, exc.error_code, exc.message))
            continue
        result = Result(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.NONE, error_message=None)
        if version >= 5:
            result.num_partitions = len(topic.replicas)
            result.replication_factor = topic.replication_factor
            result.configs = [
                ConfigResult(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                             is_sensitive=e.sensitive)
                for e in describe_topic_configs(topic.configs, topic.log_config, broker.dynamic_config.layers)]
        results.append(result)
    for name, count in counts.items():
        if count > 1:
            results.append(_failed(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
    return CreateTopicsResponse(topics=results, throttle_time_ms=quota.finish(connection))


def _failed(name: str, error: ErrorCode, message: str) -> CreateTopicsResponse.CreatableTopicResult:
    return Result(name=name, topic_id=uuid.UUID(int=0), error_code=error, error_message=message)


def _requested_partitions(broker: BrokerContext, topics) -> int:
    """Partitions the request would create, counted as Kafka's validateTotalNumberOfPartitions does."""
    total = 0
    for t in topics:
        if t.assignments:
            total += len(t.assignments)
        elif t.num_partitions == -1:
            total += broker.config.num_partitions
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total
