"""DescribeConfigs (key 32), versions 1-4.

TOPIC (2): every topic config Ebb knows (broker/topic_configs.py), defaults included — kafka-python's
alter_configs first calls DescribeConfigs and refuses keys that are not listed — sorted by name, each
with its value, its source (DYNAMIC_TOPIC_CONFIG for a topic override; for the broker-wide default
DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG when a dynamic broker config sets it,
STATIC_BROKER_CONFIG when the broker's properties do, else DEFAULT_CONFIG), read_only=false and
is_sensitive=false. With include_synonyms (v1+) each entry lists where a value could come from,
highest precedence first: the topic override, the broker properties set (log.* names: this broker's
dynamic value, the cluster-wide one, the static one), then the default under the broker name. v3+
adds the config type and, with include_documentation, its description. An unknown topic is
UNKNOWN_TOPIC_OR_PARTITION and an illegal name INVALID_TOPIC_EXCEPTION, for that resource only.

BROKER (4): the broker's own id lists every broker property Ebb knows with the value in force, its
source and synonyms in Kafka's precedence (broker/dynamic_config.py), read-only unless it can change
at runtime; "" lists the cluster-wide dynamic defaults that are set (DYNAMIC_DEFAULT_BROKER_CONFIG);
another id or a non-number is INVALID_REQUEST. BROKER_LOGGER (8): the broker's own id lists "root" and
every logger with the level in force (broker/log_output.py). GROUP (32): any group id, existing or not,
lists Kafka 4.3's group configs (broker/group_configs.py), the group's own values as GROUP_CONFIG before
the broker property behind each; an empty id is INVALID_REQUEST, and without DESCRIBE_CONFIGS on the
group GROUP_AUTHORIZATION_FAILED. CLIENT_METRICS (16): any subscription name, set or not, lists its three
configs (broker/client_metrics_configs.py), each set one as CLIENT_METRICS_CONFIG, the others at Kafka's
defaults; an empty name is INVALID_REQUEST, and without DESCRIBE_CONFIGS on the cluster
CLUSTER_AUTHORIZATION_FAILED. Other resource types are INVALID_REQUEST.

configuration_keys filters each resource's entries; null or empty means all (as in Kafka).

Errors (per resource): NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, INVALID_REQUEST,
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.cluster.store import StoreError, store_error_answer
from broker.handlers import BrokerContext, handles
from broker.handlers.config_resources import (
    ResourceError,
    broker_config_entries,
    check_access,
    check_broker_name,
    logger_config_entries,
)
from broker.request_context import RequestContext
from broker.topic import validate_topic_name
from broker.topic_configs import ConfigEntry, describe_topic_configs
from broker.topic_placement import TopicError
from protocol.enums import ApiKey, ConfigResourceType, ConfigSource, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeConfigsRequest, DescribeConfigsResponse

API_KEY = ApiKey.DESCRIBE_CONFIGS
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
SynonymEntry = Entry.DescribeConfigsSynonym


@handles(API_KEY, "1-4")
async def describe_configs(broker: BrokerContext, request: Request[DescribeConfigsRequest],
                           connection: RequestContext) -> DescribeConfigsResponse:
    version, body = request.api_version, request.body
    synonyms = body.include_synonyms
    documentation = version >= 3 and body.include_documentation
    results = []
    for resource in body.resources:
        result = Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                        resource_name=resource.resource_name, configs=[])
        try:
            check_access(broker, connection, resource, Operation.DESCRIBE_CONFIGS)
            entries = await _entries(broker, resource)
        except ResourceError as exc:
            result.error_code, result.error_message = exc.error_code, exc.message
        except StoreError as exc:  # a group's configs unreadable (ZooKeeper lost): this resource fails
            result.error_code, result.error_message = store_error_answer(exc)
        else:
            keys = resource.configuration_keys
            if keys:
                wanted = set(keys)
                entries = [e for e in entries if e.name in wanted]
            result.configs = [_entry(e, synonyms, documentation) for e in entries]
        results.append(result)
    return DescribeConfigsResponse(results=results)


async def _entries(broker: BrokerContext, resource) -> list[ConfigEntry]:
    kind, name = resource.resource_type, resource.resource_name
    if kind == ConfigResourceType.TOPIC:
        try:
            validate_topic_name(name)
        except TopicError as exc:
            raise ResourceError(exc.error_code, exc.message) from None
        topic = broker.topics.get(name)
        if topic is None:
            raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        return describe_topic_configs(topic.configs, topic.log_config, broker.dynamic_config.layers)
    if kind == ConfigResourceType.BROKER:
        check_broker_name(broker, name)
        return broker_config_entries(broker, per_broker=name != "")
    if kind == ConfigResourceType.BROKER_LOGGER:
        check_broker_name(broker, name, empty_allowed=False)
        return logger_config_entries()
    if kind == ConfigResourceType.GROUP:
        if name == "":
            raise ResourceError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        return await broker.group_configs.describe(name, broker.dynamic_config.layers)
    if kind == ConfigResourceType.CLIENT_METRICS:
        if name == "":
            raise ResourceError(ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")
        return await broker.client_metrics.describe(name)
    raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {kind}")


def _entry(entry: ConfigEntry, synonyms: bool, documentation: bool) -> Entry:
    return Entry(
        name=entry.name,
        value=None if entry.sensitive else entry.value,
        read_only=entry.read_only,
        config_source=entry.source,
        is_sensitive=entry.sensitive,
        synonyms=[SynonymEntry(name=s.name, value=None if entry.sensitive else s.value, source=s.source)
                  for s in entry.synonyms] if synonyms else [],
        config_type=entry.type,
        # Kafka gives log levels an empty documentation whether asked or not.
        documentation=entry.doc if documentation or entry.source == ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG else None,
    )
