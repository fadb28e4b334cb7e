"""IncrementalAlterConfigs (key 44), versions 0-1 — what librdkafka and kafka-python use.

For a TOPIC each key gets one operation on the topic's overrides: SET (0) sets it, DELETE (1) drops
the override (the default returns; deleting an unset or unknown key is a no-op), APPEND (2) adds the
comma-separated items not yet in the list, SUBTRACT (3) removes them. APPEND and SUBTRACT start from
the current value (override, else the broker default) and only apply to list configs
(cleanup.policy, the throttled-replica lists): on any other key they are INVALID_CONFIG, as in
Kafka's KRaft controller. The resulting override set is validated as a whole (INVALID_CONFIG, Kafka's
wording), persisted and pushed at once to the partition logs; a change to retention.ms,
retention.bytes, retention.min.timestamp or cleanup.policy runs a retention pass on the topic's
partitions straight away. validate_only checks without changing anything. One failing key fails the
resource and changes nothing.

Before that, as Kafka's ConfigAdminManager: a resource given twice fails (every copy) with
INVALID_REQUEST, so do duplicate keys, a null value for anything but DELETE and an unknown operation.
An unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION. BROKER
resources must name this broker (or "") and Ebb has no dynamic broker configs: SET, APPEND and
SUBTRACT are INVALID_REQUEST (and so are BROKER_LOGGER, whose levels are fixed at start-up, and
other types), while a DELETE finds nothing to delete and succeeds, as in Kafka.

Errors (per resource): NONE, INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION,
INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

import structlog

from broker.handlers import BrokerContext, handles
from broker.handlers.config_resources import (
    ResourceError,
    alter_each,
    check_access,
    check_alterations,
    check_broker_name,
    refuse_broker_changes,
)
from broker.topic_configs import TOPIC_CONFIGS, is_list, log_config_value, stored_only_default
from broker.topics import validate_topic_name
from protocol.enums import AlterConfigOp, ApiKey, ConfigResourceType, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

log = structlog.get_logger("incremental_alter_configs")

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
_OPERATIONS = frozenset(AlterConfigOp)


@handles(API_KEY, "0-1")
async def incremental_alter_configs(broker: BrokerContext, request: Request[IncrementalAlterConfigsRequest]
                                    ) -> IncrementalAlterConfigsResponse:
    body = request.body
    responses = await alter_each(body.resources, lambda r: _alter(broker, request, r, body.validate_only),
                                 Result, log)
    return IncrementalAlterConfigsResponse(responses=responses)


async def _alter(broker: BrokerContext, request, resource, validate_only: bool) -> None:
    check_access(broker, request, resource, Operation.ALTER_CONFIGS)
    check_alterations(resource.configs, null_allowed_for_op=AlterConfigOp.DELETE)
    unknown = [c.config_operation for c in resource.configs if c.config_operation not in _OPERATIONS]
    if unknown:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {unknown[0]}")
    if resource.resource_type == ConfigResourceType.TOPIC:
        validate_topic_name(resource.resource_name)
        topic = broker.topics.get(resource.resource_name)
        if topic is None:
            raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"Topic '{resource.resource_name}' does not exist.")

        def change(current: dict[str, str]) -> dict[str, str]:  # runs under the topic lock: no lost updates
            return apply_operations(broker, current, resource.configs)

        await broker.topics.alter_configs(topic.name, change, validate_only=validate_only)
    elif resource.resource_type == ConfigResourceType.BROKER:
        check_broker_name(broker, resource.resource_name)
        # Deleting a dynamic value that is not there is a no-op in Kafka too (kafka-reassign-partitions
        # --verify clears the replication throttles of every broker this way); setting one is refused.
        refuse_broker_changes(c.name for c in resource.configs if c.config_operation != AlterConfigOp.DELETE)
    elif resource.resource_type == ConfigResourceType.BROKER_LOGGER:
        check_broker_name(broker, resource.resource_name, empty_allowed=False)
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Ebb cannot change log levels at runtime; set log.level")
    else:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource.resource_type}")


def apply_operations(broker: BrokerContext, overrides: dict[str, str], operations) -> dict[str, str]:
    """The topic's overrides after the operations (validated afterwards as a whole)."""
    for op in operations:
        key, operation = op.name, op.config_operation
        if operation == AlterConfigOp.SET:
            overrides[key] = op.value
        elif operation == AlterConfigOp.DELETE:
            overrides.pop(key, None)
        else:
            if not is_list(key):
                raise ResourceError(ErrorCode.INVALID_CONFIG, f"Can't {AlterConfigOp(operation).name} to key {key} "
                                    "because its type is not LIST.")
            current = overrides[key] if key in overrides else _default(broker, key)
            items = [i.strip() for i in (current or "").split(",") if i.strip()]
            for item in (i.strip() for i in op.value.split(",")):
                if operation == AlterConfigOp.APPEND and item and item not in items:
                    items.append(item)
                elif operation == AlterConfigOp.SUBTRACT and item in items:
                    items.remove(item)
            overrides[key] = ",".join(items)
    return overrides


def _default(broker: BrokerContext, key: str) -> str | None:
    """The value a topic without an override has: the broker-wide default."""
    if TOPIC_CONFIGS[key].effective:
        return log_config_value(broker.config.topic_defaults, key)
    return stored_only_default(key, broker.config.explicit_properties)
