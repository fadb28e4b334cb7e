"""DescribeClientQuotas (key 48), versions 0-1 (KIP-546).

Ebb enforces no client quotas and stores none (AlterClientQuotas is not served), so every valid filter
matches nothing: Entries is empty. Served so that Kafka's tools work — `kafka-configs --describe
--entity-type users` asks for quotas beside SCRAM credentials. The filter is checked as Kafka checks it.

Errors: NONE; UNSUPPORTED_VERSION (an entity type other than user, client-id and ip, as Kafka answers);
INVALID_REQUEST (a type named twice, ip together with user or client-id, an unknown match type, a
match string where none belongs or missing where one is needed); CLUSTER_AUTHORIZATION_FAILED (with an
authorizer: DESCRIBE_CONFIGS on the cluster).
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
ENTITY_TYPES = ("user", "client-id", "ip")
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _filter_error(components) -> tuple[int, str] | None:
    seen: set[str] = set()
    for component in components:
        kind = component.entity_type
        if kind not in ENTITY_TYPES:  # Kafka's answer here is UNSUPPORTED_VERSION (checked against Kafka 4.3)
            return ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type {kind!r} is not supported"
        if kind in seen:
            return ErrorCode.INVALID_REQUEST, f"Entity type {kind!r} is named twice in the filter"
        seen.add(kind)
        if component.match_type not in (EXACT, DEFAULT, SPECIFIED):
            return ErrorCode.INVALID_REQUEST, f"Unknown match type {component.match_type}"
        if component.match_type == EXACT and component.match is None:
            return ErrorCode.INVALID_REQUEST, f"An exact match on {kind} needs a name to match"
        if component.match_type != EXACT and component.match is not None:
            return ErrorCode.INVALID_REQUEST, f"Match type {component.match_type} on {kind} takes no name"
    if "ip" in seen and len(seen) > 1:
        return ErrorCode.INVALID_REQUEST, "ip quotas cannot be combined with user or client-id in a filter"
    return None


@handles(API_KEY, "0-1")
async def describe_client_quotas(broker: BrokerContext,
                                 request: Request[DescribeClientQuotasRequest],
                                 connection: RequestContext) -> DescribeClientQuotasResponse:
    if not allowed_on_cluster(broker, connection, Operation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                            error_message="DESCRIBE_CONFIGS on the cluster is needed", entries=None)
    error = _filter_error(request.body.components)
    if error is not None:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=error[0], error_message=error[1],
                                            entries=None)
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                        entries=[])
