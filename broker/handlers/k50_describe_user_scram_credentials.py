"""DescribeUserScramCredentials (key 50), version 0 (KIP-554).

Lists users' SCRAM mechanisms and iteration counts (never salts or keys). Users null or empty: every
user that has a credential. A named user without one: RESOURCE_NOT_FOUND; a name asked twice:
DUPLICATE_RESOURCE (once).

Errors: NONE, RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE.
"""

from __future__ import annotations

from collections import Counter

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from broker.security.scram import MECHANISMS
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeUserScramCredentialsRequest
from protocol.messages import DescribeUserScramCredentialsResponse as Response

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS


@handles(API_KEY, "0")
async def describe_user_scram_credentials(broker: BrokerContext,
                                          request: Request[DescribeUserScramCredentialsRequest],
                                          connection: RequestContext) -> Response:
    credentials = broker.credentials
    if not allowed_on_cluster(broker, connection, Operation.DESCRIBE):
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message="DESCRIBE on the cluster is needed", results=[])
    asked = [user.name for user in request.body.users or []]
    names = asked or await credentials.users()
    counts = Counter(asked)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(Response.DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE, credential_infos=[],
                error_message="Cannot describe SCRAM credentials for the same user twice in a single request"))
            continue
        found = await credentials.describe(name)
        if not found:
            if asked:
                results.append(Response.DescribeUserScramCredentialsResult(
                    user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND, credential_infos=[],
                    error_message="Attempt to describe a user credential that does not exist"))
            continue
        infos = [Response.DescribeUserScramCredentialsResult.CredentialInfo(
            mechanism=MECHANISMS[mechanism].code, iterations=iterations) for mechanism, iterations in found.items()]
        results.append(Response.DescribeUserScramCredentialsResult(
            user=name, error_code=ErrorCode.NONE, error_message=None, credential_infos=infos))
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
