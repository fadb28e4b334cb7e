"""CreatePartitions (key 37), versions 0-3.

Grows a topic to `count` partitions (the new total): the assignment in the store and the partition
states are written, then the new partition logs are created, before the answer goes. Partitions can
only be added: the same count is INVALID_PARTITIONS ("Topic already has N partition(s)."), a smaller
one too. Explicit assignments, when given, must list exactly the added partitions, each with as many
distinct registered brokers as the topic's replication factor (INVALID_REPLICA_ASSIGNMENT). A topic
named twice gets one INVALID_REQUEST result. Internal topics keep their partition count (their
owners hash keys over it): INVALID_REQUEST. Adding more than 10000 partitions at once is
POLICY_VIOLATION. validate_only checks without changing anything. The added partitions are charged to
the client's controller_mutation_rate after the count checks, before the placement
(broker/quotas/mutations.py: refused from v3, throttled below).

Errors: NONE, THROTTLING_QUOTA_EXCEEDED (v3+), UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS,
INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST, POLICY_VIOLATION.
"""

from __future__ import annotations

from collections import Counter

import structlog

from broker.handlers import BrokerContext, handles
from broker.quotas.mutations import ThrottlingQuotaExceeded
from broker.request_context import RequestContext
from broker.security.access import allowed
from broker.topic_placement import TopicError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse

log = structlog.get_logger("create_partitions")

API_KEY = ApiKey.CREATE_PARTITIONS
Result = CreatePartitionsResponse.CreatePartitionsTopicResult


@handles(API_KEY, "0-3")
async def create_partitions(broker: BrokerContext,
                            request: Request[CreatePartitionsRequest],
                            connection: RequestContext) -> CreatePartitionsResponse:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    results = []
    quota = broker.quotas.mutations.for_request(request, connection)
    for wanted in body.topics:
        if counts[wanted.name] > 1:
            continue
        if not allowed(broker, connection, Operation.ALTER, ResourceType.TOPIC, wanted.name):
            results.append(Result(name=wanted.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  error_message="ALTER on the topic is needed to add partitions."))
            continue
        topic = broker.topics.get(wanted.name)
        if topic is not None and topic.internal:
            results.append(Result(name=wanted.name, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message=f"Cannot add partitions to internal topic {wanted.name}."))
            continue
        assignments = None if wanted.assignments is None else [list(a.broker_ids) for a in wanted.assignments]
        try:
            await broker.topics.add_partitions(wanted.name, wanted.count, assignments,
                                               validate_only=body.validate_only, charge=quota.charge)
        except (TopicError, ThrottlingQuotaExceeded) as exc:
            log.info("partitions not added", topic=wanted.name, error=exc.error_code.name, message=exc.message)
            results.append(Result(name=wanted.name, error_code=exc.error_code, error_message=exc.message))
            continue
        results.append(Result(name=wanted.name, error_code=ErrorCode.NONE, error_message=None))
    for name, count in counts.items():
        if count > 1:
            results.append(Result(name=name, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="Duplicate topic name."))
    return CreatePartitionsResponse(results=results, throttle_time_ms=quota.finish(connection))
