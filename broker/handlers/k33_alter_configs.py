"""AlterConfigs (key 33), versions 0-2 — the legacy call; aiokafka and kafkajs have no other.

For a TOPIC the given configs replace the topic's whole override set: keys left out return to their
defaults. The new set is validated (unknown keys and bad values are INVALID_CONFIG, Kafka's wording),
persisted in the metadata store and pushed at once to every partition log; a change to retention.ms,
retention.bytes, retention.min.timestamp or cleanup.policy also runs a retention pass on the topic's
partitions straight away. validate_only checks without changing anything.

Before that, as Kafka's ConfigAdminManager: a resource given twice fails (every copy) with
INVALID_REQUEST, so do duplicate keys and null values. An unknown topic is
UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION. A BROKER resource (this
broker's id, or "" for the cluster-wide defaults) has its dynamic configs replaced by the given set
(broker/dynamic_config.py); a property that cannot change at runtime, or a bad value, is
INVALID_REQUEST, as in Kafka. A GROUP (any id but "") has its configs replaced by the given set
(broker/group_configs.py: Kafka 4.3's names and checks; an unknown name or a bad value is
INVALID_CONFIG). A CLIENT_METRICS subscription (any name but "") has its configs replaced by the given
set (broker/client_metrics_configs.py: Kafka's checks and codes; an empty set removes it), given
ALTER_CONFIGS on the cluster. BROKER_LOGGER and other types are INVALID_REQUEST ("Unknown resource
type"). A value longer than 32,767 chars is INVALID_CONFIG before the type's own checks, as Kafka's
controller refuses it.

Errors (per resource): NONE, INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION,
INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

import structlog

from broker.handlers import BrokerContext, handles
from broker.handlers.config_resources import alter_each, alter_stored_configs, check_access, check_alterations
from broker.request_context import RequestContext
from protocol.enums import ApiKey, Operation
from protocol.framing import Request
from protocol.messages import AlterConfigsRequest, AlterConfigsResponse

log = structlog.get_logger("alter_configs")

API_KEY = ApiKey.ALTER_CONFIGS
Result = AlterConfigsResponse.AlterConfigsResourceResponse


@handles(API_KEY, "0-2")
async def alter_configs(broker: BrokerContext, request: Request[AlterConfigsRequest],
                        connection: RequestContext) -> AlterConfigsResponse:
    body = request.body
    responses = await alter_each(body.resources, lambda r: _alter(broker, connection, r, body.validate_only),
                                 Result, log)
    return AlterConfigsResponse(responses=responses)


async def _alter(broker: BrokerContext, connection: RequestContext, resource, validate_only: bool) -> None:
    check_access(broker, connection, resource, Operation.ALTER_CONFIGS)
    check_alterations(resource.configs)
    await alter_stored_configs(broker, resource, lambda _current: {c.name: c.value for c in resource.configs},
                               validate_only)
