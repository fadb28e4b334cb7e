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
An unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION. A BROKER
resource (this broker's id, or "" for the cluster-wide defaults) gets the same operations on its
dynamic configs (broker/dynamic_config.py; APPEND and SUBTRACT start from the value in force); a
property that cannot change at runtime, or a bad value, is INVALID_REQUEST, as in Kafka.
BROKER_LOGGER (this broker's id) sets a logger's level (SET: OFF, FATAL, ERROR, WARN, INFO, DEBUG,
TRACE, ALL) or gives it back the root's (DELETE), in force at once; an unknown logger or level is
INVALID_CONFIG, APPEND, SUBTRACT and deleting root's level INVALID_REQUEST, as in Kafka. A GROUP (any
id but "") gets SET and DELETE on its configs (broker/group_configs.py), validated as a whole as Kafka 4.3
does (INVALID_CONFIG); APPEND and SUBTRACT are INVALID_CONFIG (no group config is a list). A
CLIENT_METRICS subscription (any name but "") gets SET and DELETE on its configs, checked as a whole
as Kafka does (broker/client_metrics_configs.py; deleting every one removes the subscription); APPEND
and SUBTRACT are INVALID_CONFIG even on its two lists, as Kafka's controller treats them. Other
resource types are INVALID_REQUEST. For every type but BROKER_LOGGER a value set longer than 32,767
chars is INVALID_CONFIG before the type's own checks, as Kafka's controller refuses it.

Errors (per resource): NONE, INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION,
INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

import structlog

from broker.dynamic_config import DYNAMIC_BROKER_CONFIGS
from broker.handlers import BrokerContext, handles
from broker.handlers.config_resources import (
    ResourceError,
    alter_each,
    alter_log_levels,
    alter_stored_configs,
    check_access,
    check_alterations,
    group_list,
)
from broker.request_context import RequestContext
from broker.topic_configs import TOPIC_CONFIGS, is_list, log_config_value, stored_only_default
from protocol.enums import AlterConfigOp, ApiKey, ConfigResourceType, ConfigType, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

log = structlog.get_logger("incremental_alter_configs")

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
_OPERATIONS = frozenset(AlterConfigOp)


@handles(API_KEY, "0-1")
async def incremental_alter_configs(broker: BrokerContext, request: Request[IncrementalAlterConfigsRequest],
                                    connection: RequestContext
                                    ) -> IncrementalAlterConfigsResponse:
    body = request.body
    responses = await alter_each(body.resources, lambda r: _alter(broker, connection, r, body.validate_only),
                                 Result, log)
    return IncrementalAlterConfigsResponse(responses=responses)


async def _alter(broker: BrokerContext, connection: RequestContext, resource, validate_only: bool) -> None:
    check_access(broker, connection, resource, Operation.ALTER_CONFIGS)
    check_alterations(resource.configs, null_allowed_for_op=AlterConfigOp.DELETE)
    unknown = [c.config_operation for c in resource.configs if c.config_operation not in _OPERATIONS]
    if unknown:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {unknown[0]}")
    kind = resource.resource_type
    if kind == ConfigResourceType.BROKER_LOGGER:
        alter_log_levels(broker, resource.resource_name, resource.configs, validate_only)
        return
    if kind == ConfigResourceType.TOPIC:
        def change(current: dict[str, str]) -> dict[str, str]:  # runs under the topic lock: no lost updates
            return apply_operations(current, resource.configs, is_list, lambda key: _default(broker, key))
    elif kind == ConfigResourceType.BROKER:
        def change(current: dict[str, str]) -> dict[str, str]:  # under the dynamic configs' lock
            return apply_operations(current, resource.configs, _broker_list,
                                    lambda key: broker.dynamic_config.layers.merged().get(key, _broker_default(key)))
    else:  # no group config is a list; nor, for Kafka, is any client metrics one
        def change(current: dict[str, str]) -> dict[str, str]:
            return apply_operations(current, resource.configs, group_list if kind == ConfigResourceType.GROUP
                                    else lambda _key: False, lambda _key: None)
    await alter_stored_configs(broker, resource, change, validate_only)


def apply_operations(overrides: dict[str, str], operations, list_config, in_force) -> dict[str, str]:
    """The overrides (a topic's, or dynamic broker configs) after the operations, validated afterwards
    as a whole; APPEND and SUBTRACT start from `in_force(key)` and need `list_config(key)`."""
    for op in operations:
        key, operation = op.name, op.config_operation
        if operation == AlterConfigOp.SET:
            overrides[key] = op.value
        elif operation == AlterConfigOp.DELETE:
            overrides.pop(key, None)
        else:
            if not list_config(key):
                raise ResourceError(ErrorCode.INVALID_CONFIG, f"Can't {AlterConfigOp(operation).name} to key {key} "
                                    "because its type is not LIST.")
            current = overrides[key] if key in overrides else in_force(key)
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
        return log_config_value(broker.dynamic_config.topic_defaults, key)
    return stored_only_default(key, broker.dynamic_config.layers.merged())


def _broker_list(key: str) -> bool:
    definition = DYNAMIC_BROKER_CONFIGS.get(key)
    return definition is not None and definition.type is ConfigType.LIST


def _broker_default(key: str) -> str | None:
    definition = DYNAMIC_BROKER_CONFIGS.get(key)
    return None if definition is None else definition.default
