"""DescribeClientQuotas (key 48), versions 0-1 (KIP-546).

The client quotas in force on this broker (broker/quotas/store.py: every broker reads them again after
each change) whose entity matches the filter, as Kafka 4.3.1 matches (ClientQuotasImage.describe):
each component names an entity type with an exact name (0), the type's default (1) or any name of the
type (2, the default included); an entity matches when it has every type the filter names, with the
name asked for; with `strict` it must have no other type.

Errors: NONE; INVALID_REQUEST (an empty entity type, a type named twice, an unknown match type, a match
string where none belongs or missing where one is needed, ip together with user or client-id);
UNSUPPORTED_VERSION (an entity type other than user, client-id and ip, as Kafka answers);
CLUSTER_AUTHORIZATION_FAILED (with an authorizer: DESCRIBE_CONFIGS on the cluster).
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.quotas.entities import CLIENT_ID, ENTITY_TYPES, IP, USER, QuotaEntity
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
_Entry = DescribeClientQuotasResponse.EntryData


class _FilterError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _filter(components) -> tuple[dict[str, str | None], set[str]]:
    """(exact names by type, types matched by any name), checked in Kafka's order."""
    exact: dict[str, str | None] = {}
    any_name: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            raise _FilterError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in any_name:
            raise _FilterError(ErrorCode.INVALID_REQUEST,
                               f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in ENTITY_TYPES:  # Kafka's answer here is UNSUPPORTED_VERSION
            raise _FilterError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if component.match_type == EXACT:
            if component.match is None:
                raise _FilterError(ErrorCode.INVALID_REQUEST,
                                   "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = component.match
        elif component.match_type in (DEFAULT, SPECIFIED):
            if component.match is not None:
                name = "MATCH_TYPE_DEFAULT" if component.match_type == DEFAULT else "MATCH_TYPE_SPECIFIED"
                raise _FilterError(ErrorCode.INVALID_REQUEST,
                                   f"Request specified {name}, but also specified a match string.")
            if component.match_type == DEFAULT:
                exact[kind] = None
            else:
                any_name.add(kind)
        else:
            raise _FilterError(ErrorCode.INVALID_REQUEST, f"Unknown match type {component.match_type}")
    named = exact.keys() | any_name
    if IP in named and (USER in named or CLIENT_ID in named):
        raise _FilterError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                                      "component should not be used with user or clientId filter "
                                                      "component.")
    return exact, any_name


def _matches(entity: QuotaEntity, exact: dict[str, str | None], any_name: set[str], strict: bool) -> bool:
    parts = dict(entity)
    if strict and len(parts) != len(exact) + len(any_name):
        return False
    return all(kind in parts and parts[kind] == name for kind, name in exact.items()) and \
        all(kind in parts for kind in any_name)


@handles(API_KEY, "0-1")
async def describe_client_quotas(broker: BrokerContext,
                                 request: Request[DescribeClientQuotasRequest],
                                 connection: RequestContext) -> DescribeClientQuotasResponse:
    if not allowed_on_cluster(broker, connection, Operation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                            error_message="DESCRIBE_CONFIGS on the cluster is needed", entries=None)
    try:
        exact, any_name = _filter(request.body.components)
    except _FilterError as exc:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=exc.code, error_message=exc.message,
                                            entries=None)
    entries = [_Entry(entity=[_Entry.EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
                      values=[_Entry.ValueData(key=key, value=value) for key, value in sorted(values.items())])
               for entity, values in sorted(broker.client_quotas.quotas.items(), key=lambda item: repr(item[0]))
               if _matches(entity, exact, any_name, request.body.strict)]
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                        entries=entries)
