"""ListConfigResources (key 74), versions 0-1 (KIP-1142) — what `kafka-configs --entity-type groups`
asks to tell a group with configs from one without.

The config resources of the types asked for (v1; empty: every type), as Kafka 4.3's KafkaApis lists
them, in its order: GROUP (32) the groups that have group configs (broker/group_configs.py),
CLIENT_METRICS (16) the client metrics subscriptions that have configs
(broker/client_metrics_configs.py), BROKER_LOGGER (8) and BROKER (4) each alive broker's id, TOPIC (2)
every topic. Any other type is UNSUPPORTED_VERSION for the whole request, as in Kafka. Version 0 (it
was ListClientMetricsResources) lists the client metrics subscriptions only. Needs DESCRIBE_CONFIGS on
the cluster (CLUSTER_AUTHORIZATION_FAILED).

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.cluster_view import alive_brokers
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from protocol.enums import ApiKey, ConfigResourceType, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ListConfigResourcesRequest, ListConfigResourcesResponse

API_KEY = ApiKey.LIST_CONFIG_RESOURCES
Listed = ListConfigResourcesResponse.ConfigResource
_LISTED = frozenset(ConfigResourceType)


@handles(API_KEY, "0-1")
async def list_config_resources(broker: BrokerContext, request: Request[ListConfigResourcesRequest],
                                connection: RequestContext
                                ) -> ListConfigResourcesResponse:
    if not allowed_on_cluster(broker, connection, Operation.DESCRIBE_CONFIGS):
        return ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, config_resources=[])
    kinds: set[int] = {ConfigResourceType.CLIENT_METRICS}
    if request.api_version > 0:
        kinds = set(request.body.resource_types) or set(_LISTED)
    if not kinds <= _LISTED:
        return ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=[])
    listed = []
    if ConfigResourceType.GROUP in kinds:
        listed += [Listed(resource_name=g, resource_type=ConfigResourceType.GROUP)
                   for g in await broker.group_configs.group_ids()]
    if ConfigResourceType.CLIENT_METRICS in kinds:
        listed += [Listed(resource_name=name, resource_type=ConfigResourceType.CLIENT_METRICS)
                   for name in await broker.client_metrics.names()]
    brokers = [str(b.node_id) for b in alive_brokers(broker, connection.listener_name)]
    for kind in (ConfigResourceType.BROKER_LOGGER, ConfigResourceType.BROKER):
        if kind in kinds:
            listed += [Listed(resource_name=b, resource_type=kind) for b in brokers]
    if ConfigResourceType.TOPIC in kinds:
        listed += [Listed(resource_name=t.name, resource_type=ConfigResourceType.TOPIC) for t in broker.topics.all()]
    return ListConfigResourcesResponse(error_code=ErrorCode.NONE, config_resources=listed)
