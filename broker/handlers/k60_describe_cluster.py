"""DescribeCluster (key 60), versions 0-2.

The cluster id, the alive (unfenced) brokers and the controller (on one broker: itself), and the cluster's
authorized operations: INT32_MIN unless requested, then the cluster operations the caller may do (all of
them without an authorizer; only valid bits, since kafka-python rejects unknown ones).

Endpoint type (v1+): 1 (brokers) is served; 2 (controllers) is MISMATCHED_ENDPOINT_TYPE, since this is
a broker endpoint; anything else is UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST for either in v0, which
cannot carry the field anyway). include_fenced_brokers (v2) changes nothing: no broker is fenced.

Errors: NONE, MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE, INVALID_REQUEST.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.acl_operations import authorized_on_cluster
from broker.handlers.cluster_view import alive_brokers, controller_id
from broker.request_context import RequestContext
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeClusterRequest, DescribeClusterResponse

API_KEY = ApiKey.DESCRIBE_CLUSTER
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2


@handles(API_KEY, "0-2")
async def describe_cluster(broker: BrokerContext, request: Request[DescribeClusterRequest],
                           connection: RequestContext) -> DescribeClusterResponse:
    version, body = request.api_version, request.body
    endpoint_type = body.endpoint_type if version >= 1 else BROKER_ENDPOINT
    if endpoint_type not in (BROKER_ENDPOINT, CONTROLLER_ENDPOINT):
        return DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE if version >= 1 else ErrorCode.INVALID_REQUEST,
            error_message=f"Unsupported endpoint type {endpoint_type}", endpoint_type=endpoint_type,
            cluster_id=broker.cluster_id)
    if endpoint_type != BROKER_ENDPOINT:
        return DescribeClusterResponse(
            error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE if version >= 1 else ErrorCode.INVALID_REQUEST,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                          "type CONTROLLER", endpoint_type=endpoint_type, cluster_id=broker.cluster_id)
    return DescribeClusterResponse(
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=broker.cluster_id,
        controller_id=controller_id(broker),
        brokers=[DescribeClusterResponse.DescribeClusterBroker(
            broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=False)
            for b in alive_brokers(broker, connection.listener_name)],
        cluster_authorized_operations=authorized_on_cluster(broker, connection,
                                                            body.include_cluster_authorized_operations),
    )
