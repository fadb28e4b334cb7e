"""What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: resource types, the checks
Kafka's ConfigAdminManager makes before touching anything, and the broker's own config entries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

import structlog

from broker import log_output
from broker.client_metrics_configs import ClientMetricsError
from broker.cluster.store import StoreError, store_error_answer
from broker.config import INT_PROPERTIES, known_broker_properties
from broker.dynamic_config import DYNAMIC_BROKER_CONFIGS, DynamicConfigError
from broker.group_configs import GROUP_BROKER_DEFAULTS, GROUP_CONFIGS
from broker.handlers.context import BrokerContext
from broker.security.access import Asker, allowed, allowed_on_cluster
from broker.security.dynamic_tls import RELOADABLE, STORE_PASSWORDS, listener_key
from broker.security.passwords import is_password
from broker.topic import validate_topic_name
from broker.topic_configs import TOPIC_CONFIGS, ConfigEntry, InvalidConfig, layered_synonyms
from broker.topic_placement import TopicError
from protocol.enums import AlterConfigOp, ConfigResourceType, ConfigSource, ConfigType, Operation, ResourceType
from protocol.errors import CodedError, ErrorCode

log = structlog.get_logger("configs")


class ResourceError(CodedError):
    """One config resource refused (its entry in the answer carries the code and message)."""


def duplicate_resources(resources) -> set[tuple[int, str]]:
    """(type, name) pairs that appear more than once; each of their entries fails with INVALID_REQUEST."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {key for key, count in counts.items() if count > 1}


DUPLICATE_RESOURCE = "Each resource must appear at most once."


def check_access(broker: BrokerContext, connection: Asker, resource, operation: Operation) -> None:
    """With an authorizer: a topic's configs need `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on the
    topic, a group's on the group, the broker's on the cluster."""
    if resource.resource_type == ConfigResourceType.TOPIC:
        if not allowed(broker, connection, operation, ResourceType.TOPIC, resource.resource_name):
            raise ResourceError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                f"{operation.name} on topic '{resource.resource_name}' is needed")
    elif resource.resource_type == ConfigResourceType.GROUP:
        if not allowed(broker, connection, operation, ResourceType.GROUP, resource.resource_name):
            raise ResourceError(ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                f"{operation.name} on group '{resource.resource_name}' is needed")
    elif not allowed_on_cluster(broker, connection, operation):
        raise ResourceError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{operation.name} on the cluster is needed")


def check_alterations(configs, *, null_allowed_for_op: int | None = None) -> None:
    """Duplicate keys and null values are INVALID_REQUEST (DELETE may carry null in incremental alters)."""
    names = [c.name for c in configs]
    if len(names) != len(set(names)):
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in configs
             if c.value is None and (null_allowed_for_op is None or c.config_operation != null_allowed_for_op)]
    if nulls:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")


MAX_VALUE_CHARS = 32767
VALUE_TOO_LONG = ("The configuration value cannot be added because it exceeds the maximum value size of "
                  f"{MAX_VALUE_CHARS} bytes.")


def within_value_size(change: Callable[[dict[str, str]], Mapping[str, str | None]]
                      ) -> Callable[[dict[str, str]], dict[str, str | None]]:
    """`change`, whose result is refused INVALID_CONFIG where a value it sets or changes is longer than
    Kafka's controller stores: 32,767 Java chars (UTF-16 units, whatever the message says), for every
    type the controller alters (topics, brokers, groups, client metrics), before the type's own checks."""
    def checked(current: dict[str, str]) -> dict[str, str | None]:
        new = dict(change(dict(current)))
        for key, value in new.items():
            if (value is not None and value != current.get(key)
                    and len(value.encode("utf-16-le", "surrogatepass")) // 2 > MAX_VALUE_CHARS):
                raise ResourceError(ErrorCode.INVALID_CONFIG, VALUE_TOO_LONG)
        return new

    return checked


def check_broker_name(broker: BrokerContext, name: str, *, empty_allowed: bool = True) -> None:
    """A BROKER resource names this broker's id, or "" for the cluster-wide defaults."""
    if name == "" and empty_allowed:
        return
    if name == "":
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        node_id = int(name)
    except ValueError:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if node_id != broker.node_id:
        expected = f"{broker.node_id} or empty string" if empty_allowed else str(broker.node_id)
        raise ResourceError(ErrorCode.INVALID_REQUEST,
                            f"Unexpected broker id, expected {expected}, but received {name}")


async def alter_broker_configs(broker: BrokerContext, name: str, change, validate_only: bool) -> None:
    """Replace the dynamic configs of BROKER `name` (this broker's id, or "" for the cluster-wide
    defaults) with `change(current)`; Kafka answers what it refuses with INVALID_REQUEST."""
    check_broker_name(broker, name)
    try:
        await broker.dynamic_config.alter(name, change, validate_only=validate_only)
    except DynamicConfigError as exc:
        raise ResourceError(ErrorCode.INVALID_REQUEST, str(exc)) from None


async def alter_group_configs(broker: BrokerContext, name: str, change, validate_only: bool) -> None:
    """Replace the configs of GROUP `name` with `change(current)` (broker/group_configs.py): no name is
    INVALID_REQUEST, a value or name Kafka refuses INVALID_CONFIG, as Kafka's controller answers."""
    if name == "":
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    try:
        await broker.group_configs.alter(name, change, validate_only=validate_only)
    except InvalidConfig as exc:
        raise ResourceError(ErrorCode.INVALID_CONFIG, str(exc)) from None


async def alter_client_metrics(broker: BrokerContext, name: str, change, validate_only: bool) -> None:
    """Replace the configs of the CLIENT_METRICS subscription `name` with `change(current)`
    (broker/client_metrics_configs.py: Kafka's checks, each with the code Kafka answers it with)."""
    try:
        await broker.client_metrics.alter(name, change, validate_only=validate_only)
    except ClientMetricsError as exc:
        raise ResourceError(exc.error_code, exc.message) from None


async def alter_stored_configs(broker: BrokerContext, resource, change: Callable[[dict[str, str]], Mapping],
                               validate_only: bool) -> None:
    """A TOPIC, BROKER, GROUP or CLIENT_METRICS resource (the types Kafka's controller alters) has its
    configs replaced by `change(current)`: each value's size checked first, then the type's own checks;
    any other type is INVALID_REQUEST."""
    change = within_value_size(change)
    kind, name = resource.resource_type, resource.resource_name
    if kind == ConfigResourceType.TOPIC:
        validate_topic_name(name)
        await broker.topics.alter_configs(name, change, validate_only=validate_only)
    elif kind == ConfigResourceType.BROKER:
        await alter_broker_configs(broker, name, change, validate_only)
    elif kind == ConfigResourceType.GROUP:
        await alter_group_configs(broker, name, change, validate_only)
    elif kind == ConfigResourceType.CLIENT_METRICS:
        await alter_client_metrics(broker, name, change, validate_only)
    else:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {kind}")


def group_list(name: str) -> bool:
    """No group config is a list: APPEND and SUBTRACT are INVALID_CONFIG on every one."""
    definition = GROUP_CONFIGS.get(name)
    return definition is not None and definition.type is ConfigType.LIST


_LIST_PROPERTIES = {"listeners", "advertised.listeners", "log.dirs", "log.cleanup.policy",
                    "log.retention.committed.groups"}
# Broker properties that are one value under several names and units (Kafka's brokerConfigSynonyms).
_SYNONYMS = (("log.retention.ms", "log.retention.minutes", "log.retention.hours"), ("log.roll.ms", "log.roll.hours"),
             ("log.roll.jitter.ms", "log.roll.jitter.hours"))


def broker_synonyms(name: str) -> tuple[str, ...]:
    """`name` and the properties standing for the same value after it, coarser units last."""
    for group in _SYNONYMS:
        if name in group:
            return group[group.index(name):]
    split = listener_key(name)
    if split is not None:  # a listener's own value, then the one every listener shares
        base = split[1]  # <mechanism>.sasl.jaas.config stands under sasl.jaas.config, as in Kafka
        for mechanism_config in ("sasl.jaas.config", "connections.max.reauth.ms"):  # its ListenerMechanismConfigs
            if base.endswith(mechanism_config):
                return (name, mechanism_config)
        return (name, base)
    return (name,)


def _broker_type(name: str, value: str | None) -> ConfigType:
    if is_password(name):
        return ConfigType.PASSWORD
    if name in DYNAMIC_BROKER_CONFIGS:
        return DYNAMIC_BROKER_CONFIGS[name].type
    if name in _LIST_PROPERTIES:
        return ConfigType.LIST
    if name in GROUP_BROKER_DEFAULTS or name in INT_PROPERTIES:  # every group.* bound and default is an INT
        return ConfigType.INT
    if value in ("true", "false"):
        return ConfigType.BOOLEAN
    try:
        number = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        try:
            float(value)  # type: ignore[arg-type]
            return ConfigType.DOUBLE
        except (TypeError, ValueError):
            return ConfigType.STRING
    wide = name.endswith((".ms", ".bytes", ".messages", ".timestamp")) or not -(2**31) <= number < 2**31
    return ConfigType.LONG if wide else ConfigType.INT


def _broker_doc(name: str) -> str | None:
    for definition in TOPIC_CONFIGS.values():
        if name in definition.broker_synonyms:
            return f"The default of the topic config {definition.name}: {definition.doc}"
    return None


def broker_config_entries(broker: BrokerContext, *, per_broker: bool) -> list[ConfigEntry]:
    """BROKER <own id>: every broker property Ebb knows with the value in force here, its source and
    synonyms (dynamic per-broker, dynamic cluster-wide, static, default), read-only unless dynamic.
    BROKER "": only the cluster-wide dynamic defaults that are set, as Kafka lists them."""
    dynamic = broker.dynamic_config
    layers = dynamic.layers
    in_force = known_broker_properties(broker.config, dynamic.topic_defaults, layers.merged())
    names = sorted(in_force) if per_broker else sorted(layers.cluster_default)
    entries = []
    for name in names:
        synonyms = layered_synonyms(broker_synonyms(name), layers)
        value = in_force.get(name)
        if not per_broker:
            synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
            value = layers.cluster_default[name]
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, tuple(synonyms), _broker_type(name, value),
                                   _broker_doc(name), read_only=_read_only(name), sensitive=is_password(name)))
    return entries


def _read_only(name: str) -> bool:
    """As Kafka lists it: the SSL store keys without a listener prefix are dynamic (though only altered
    under one), and the prefixed names are read-only (Kafka looks the full name up in its list)."""
    return name not in DYNAMIC_BROKER_CONFIGS and name not in RELOADABLE and name not in STORE_PASSWORDS


def logger_config_entries() -> list[ConfigEntry]:
    """BROKER_LOGGER: root and every logger of the broker, each with the level in force (Kafka answers
    them with no type and an empty documentation)."""
    levels = log_output.LEVELS
    return [ConfigEntry(name, levels.level_of(name), ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, (),
                        ConfigType.UNKNOWN, "") for name in levels.names()]


def alter_log_levels(broker: BrokerContext, name: str, operations, validate_only: bool) -> None:
    """IncrementalAlterConfigs of BROKER_LOGGER <own id>: SET a logger's level, DELETE it (back to
    root's), all checked first as Kafka's ConfigAdminManager does; in force at once."""
    check_broker_name(broker, name, empty_allowed=False)
    levels = log_output.LEVELS
    known = set(levels.names())
    for op in operations:
        if op.config_operation in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"{AlterConfigOp(op.config_operation).name} operation "
                                "is not allowed for the BROKER_LOGGER resource")
        if op.name not in known:
            raise ResourceError(ErrorCode.INVALID_CONFIG, f"Logger {op.name} does not exist!")
        if op.config_operation == AlterConfigOp.DELETE and op.name == log_output.ROOT:
            raise ResourceError(ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
        if op.config_operation == AlterConfigOp.SET and op.value not in log_output.KAFKA_LEVELS:
            raise ResourceError(ErrorCode.INVALID_CONFIG, f"Cannot set the log level of {op.name} to {op.value} as "
                                f"it is not a supported log level. Valid log levels are "
                                f"{', '.join(log_output.KAFKA_LEVELS)}")
    if validate_only:
        return
    for op in operations:
        if op.config_operation == AlterConfigOp.SET:
            levels.set(op.name, op.value)
        else:
            levels.unset(op.name)
    log.info("log levels changed", levels={op.name: op.value for op in operations})


async def alter_each(resources, alter, result_class, log) -> list:
    """Run `alter(resource)` for every resource of an (Incremental)AlterConfigs request and build the
    per-resource results; a resource named twice fails with INVALID_REQUEST and is left alone."""
    duplicates = duplicate_resources(resources)
    responses = []
    for resource in resources:
        error, message = ErrorCode.NONE, None
        try:
            if (resource.resource_type, resource.resource_name) in duplicates:
                raise ResourceError(ErrorCode.INVALID_REQUEST, DUPLICATE_RESOURCE)
            await alter(resource)
        except (ResourceError, TopicError) as exc:
            error, message = exc.error_code, exc.message
        except StoreError as exc:  # ZooKeeper lost, or a full disk: this resource fails, the connection stays
            error, message = store_error_answer(exc)
        if error != ErrorCode.NONE:
            log.info("configs not altered", resource_type=resource.resource_type, resource=resource.resource_name,
                     error=error.name, message=message)
        responses.append(result_class(error_code=error, error_message=message, resource_type=resource.resource_type,
                                      resource_name=resource.resource_name))
    return responses
