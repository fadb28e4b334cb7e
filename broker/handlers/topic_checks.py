"""The per-topic checks of the describe APIs that name partitions (DescribeProducers, DescribeErasure), in
Kafka's order: an illegal name INVALID_TOPIC_EXCEPTION, no right on the topic TOPIC_AUTHORIZATION_FAILED,
an unknown topic UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

from broker.handlers.context import BrokerContext
from broker.security.access import Asker, allowed
from broker.topic import validate_topic_name
from broker.topic_placement import TopicError
from protocol.enums import Operation, ResourceType
from protocol.errors import CodedError, ErrorCode


def topic_error(broker: BrokerContext, connection: Asker, name: str, operation: Operation) -> CodedError | None:
    """The error every partition asked of topic `name` gets, or None when the topic passes."""
    try:
        validate_topic_name(name)
    except TopicError as exc:
        return exc
    if not allowed(broker, connection, operation, ResourceType.TOPIC, name):
        return CodedError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"no {operation.name} on topic {name!r}")
    if broker.topics.get(name) is None:
        return CodedError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return None
