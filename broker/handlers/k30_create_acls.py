"""CreateAcls (key 30), versions 1-3 (v0, without pattern types, is gone from Kafka 4 too).

Needs ALTER on the CLUSTER. Each ACL is checked on its own: an unknown type, pattern, operation or
permission, ANY/MATCH, an operation the resource type does not have, a cluster resource not named
kafka-cluster, or a principal without a type is INVALID_REQUEST for that ACL; the others are stored
(broker/security/authorizer.py) and every broker enforces them at once.

Errors: NONE, SECURITY_DISABLED (no authorizer), CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST,
KAFKA_STORAGE_ERROR (the metadata store's file could not be written: a full disk; adding again is safe).
"""

from __future__ import annotations

from broker.cluster.store import StoreWriteFailed
from broker.handlers import BrokerContext, handles
from broker.handlers.acl_requests import SECURITY_DISABLED_TEXT, InvalidAcl, acl_from
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import CreateAclsRequest, CreateAclsResponse

API_KEY = ApiKey.CREATE_ACLS


@handles(API_KEY, "1-3")
async def create_acls(broker: BrokerContext, request: Request[CreateAclsRequest],
                      connection: RequestContext) -> CreateAclsResponse:
    creations = request.body.creations

    def every(code: int, message: str) -> CreateAclsResponse:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            CreateAclsResponse.AclCreationResult(error_code=code, error_message=message) for _ in creations])

    if broker.authorizer is None:
        return every(ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_TEXT)
    if not allowed_on_cluster(broker, connection, Operation.ALTER):
        return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is needed to create ACLs")
    results, valid = [], []
    for entry in creations:
        try:
            valid.append(acl_from(entry, request.api_version))
            results.append(CreateAclsResponse.AclCreationResult(error_code=ErrorCode.NONE, error_message=None))
        except InvalidAcl as exc:
            results.append(CreateAclsResponse.AclCreationResult(error_code=ErrorCode.INVALID_REQUEST,
                                                                error_message=str(exc)))
    try:
        await broker.authorizer.add(valid)
    except StoreWriteFailed as exc:
        for result in results:
            if result.error_code == ErrorCode.NONE:
                result.error_code, result.error_message = ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
    return CreateAclsResponse(throttle_time_ms=0, results=results)
