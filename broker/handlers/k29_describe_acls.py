"""DescribeAcls (key 29), versions 1-3.

Lists the ACLs a filter matches (ANY, and MATCH for every pattern that covers a name), grouped by
resource pattern. Needs DESCRIBE on the CLUSTER.

Errors: NONE, SECURITY_DISABLED (no authorizer), CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST (an
unknown enum value in the filter).
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.acl_requests import SECURITY_DISABLED_TEXT, InvalidAcl, filter_from
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeAclsRequest, DescribeAclsResponse

API_KEY = ApiKey.DESCRIBE_ACLS


@handles(API_KEY, "1-3")
async def describe_acls(broker: BrokerContext, request: Request[DescribeAclsRequest],
                        connection: RequestContext) -> DescribeAclsResponse:
    def failed(code: int, message: str) -> DescribeAclsResponse:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message, resources=[])

    if broker.authorizer is None:
        return failed(ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_TEXT)
    if not allowed_on_cluster(broker, connection, Operation.DESCRIBE):
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "DESCRIBE on the cluster is needed to list ACLs")
    try:
        acl_filter = filter_from(request.body, request.api_version)
    except InvalidAcl as exc:
        return failed(ErrorCode.INVALID_REQUEST, str(exc))
    grouped: dict[tuple, list] = {}
    for acl in broker.authorizer.describe(acl_filter):
        grouped.setdefault((acl.resource_type, acl.name, acl.pattern), []).append(acl)
    Resource = DescribeAclsResponse.DescribeAclsResource
    resources = [Resource(resource_type=int(kind), resource_name=name, pattern_type=int(pattern), acls=[
        Resource.AclDescription(principal=a.principal, host=a.host, operation=int(a.operation),
                                permission_type=int(a.permission)) for a in acls])
        for (kind, name, pattern), acls in sorted(grouped.items())]
    return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                resources=resources)
