"""AlterConfigs (key 33), versions 0-2 — the legacy call; aiokafka and kafkajs have no other.

For a TOPIC the given configs replace the topic's whole override set: keys left out return to their
defaults. The new set is validated (unknown keys and bad values are INVALID_CONFIG, Kafka's wording),
persisted in the metadata store and pushed at once to every partition log; a change to retention.ms,
retention.bytes, retention.min.timestamp or cleanup.policy also runs a retention pass on the topic's
partitions straight away. validate_only checks without changing anything.

Before that, as Kafka's ConfigAdminManager: a resource given twice fails (every copy) with
INVALID_REQUEST, so do duplicate keys and null values. An unknown topic is
UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION. BROKER resources must name this
broker (or "") and Ebb has no dynamic broker configs, so a non-empty change is INVALID_REQUEST.
BROKER_LOGGER and other types are INVALID_REQUEST ("Unknown resource type").

Errors (per resource): NONE, INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION,
INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

import structlog

from broker.handlers import handles
from broker.handlers.config_resources import (
    BROKER,
    DUPLICATE_RESOURCE,
    TOPIC,
    ResourceError,
    check_alterations,
    check_broker_name,
    duplicate_resources,
    refuse_broker_changes,
)
from broker.topics import TopicError, validate_topic_name
from protocol.errors import ErrorCode
from protocol.messages import AlterConfigsResponse

log = structlog.get_logger("alter_configs")

API_KEY = 33
Result = AlterConfigsResponse.AlterConfigsResourceResponse


@handles(API_KEY, "0-2")
async def alter_configs(broker, request) -> AlterConfigsResponse:
    body = request.body
    duplicates = duplicate_resources(body.resources)
    responses = []
    for resource in body.resources:
        error, message = ErrorCode.NONE, None
        try:
            if (resource.resource_type, resource.resource_name) in duplicates:
                raise ResourceError(ErrorCode.INVALID_REQUEST, DUPLICATE_RESOURCE)
            await _alter(broker, resource, body.validate_only)
        except ResourceError as exc:
            error, message = exc.error_code, exc.message
        except TopicError as exc:
            error, message = exc.error_code, exc.message
        if error != ErrorCode.NONE:
            log.info("configs not altered", resource_type=resource.resource_type, resource=resource.resource_name,
                     error=error.name, message=message)
        responses.append(Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                                resource_name=resource.resource_name))
    return AlterConfigsResponse(responses=responses)


async def _alter(broker, resource, validate_only: bool) -> None:
    check_alterations(resource.configs)
    if resource.resource_type == TOPIC:
        validate_topic_name(resource.resource_name)
        await broker.topics.alter_configs(resource.resource_name, {c.name: c.value for c in resource.configs},
                                          validate_only=validate_only)
    elif resource.resource_type == BROKER:
        check_broker_name(broker, resource.resource_name)
        refuse_broker_changes(c.name for c in resource.configs)
    else:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource.resource_type}")
