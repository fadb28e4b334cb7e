"""DeleteAcls (key 31), versions 1-3.

Deletes every ACL each filter matches and lists them per filter. Needs ALTER on the CLUSTER.

Errors: NONE, SECURITY_DISABLED (no authorizer), CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST (an
unknown enum value in a filter), KAFKA_STORAGE_ERROR (the metadata store's file could not be written:
a full disk; deleting again is safe).
"""

from __future__ import annotations

from broker.cluster.store import StoreWriteFailed
from broker.handlers import BrokerContext, handles
from broker.handlers.acl_requests import SECURITY_DISABLED_TEXT, InvalidAcl, filter_from
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DeleteAclsRequest, DeleteAclsResponse

API_KEY = ApiKey.DELETE_ACLS
Result = DeleteAclsResponse.DeleteAclsFilterResult


@handles(API_KEY, "1-3")
async def delete_acls(broker: BrokerContext, request: Request[DeleteAclsRequest],
                      connection: RequestContext) -> DeleteAclsResponse:
    filters = request.body.filters

    def every(code: int, message: str) -> DeleteAclsResponse:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            Result(error_code=code, error_message=message, matching_acls=[]) for _ in filters])

    if broker.authorizer is None:
        return every(ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_TEXT)
    if not allowed_on_cluster(broker, connection, Operation.ALTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is needed to delete ACLs")
    results, doomed = [], []
    for entry in filters:
        try:
            acl_filter = filter_from(entry, request.api_version)
        except InvalidAcl as exc:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc), matching_acls=[]))
            continue
        matched = broker.authorizer.describe(acl_filter)
        doomed += matched
        results.append(Result(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            Result.DeleteAclsMatchingAcl(error_code=ErrorCode.NONE, error_message=None,
                                         resource_type=int(a.resource_type), resource_name=a.name,
                                         pattern_type=int(a.pattern), principal=a.principal, host=a.host,
                                         operation=int(a.operation), permission_type=int(a.permission))
            for a in matched]))
    try:
        await broker.authorizer.remove(list(dict.fromkeys(doomed)))
    except StoreWriteFailed as exc:
        for result in results:
            if result.error_code == ErrorCode.NONE:
                result.error_code, result.error_message, result.matching_acls = \
                    ErrorCode.KAFKA_STORAGE_ERROR, str(exc), []
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
