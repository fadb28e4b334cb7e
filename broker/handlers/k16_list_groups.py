"""ListGroups (key 16), versions 0-5.

Every group this broker coordinates except Dead ones, with its protocol type ("" for a group that
only stores offsets). v4+: StatesFilter keeps groups in one of the named states (Empty,
PreparingRebalance, CompletingRebalance, Stable; case-insensitive) and the answer carries the state;
v5+: TypesFilter keeps groups of the named types ("classic", "share" for KIP-932's share groups, whose
states are Empty and Stable and whose protocol type is "share", or "consumer" for KIP-848's consumer
groups, protocol type "consumer") and the answer carries the type.
Empty filters filter nothing.

Errors: NONE, COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from broker.group import GroupError
from broker.group.consumer_group import GROUP_TYPE as CONSUMER_TYPE
from broker.group.consumer_group import ConsumerGroup
from broker.group.group import GROUP_TYPE
from broker.group.share_group import GROUP_TYPE as SHARE_TYPE
from broker.group.share_group import ShareGroup
from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed, allowed_on_cluster
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ListGroupsRequest, ListGroupsResponse

API_KEY = ApiKey.LIST_GROUPS
_Listed = ListGroupsResponse.ListedGroup


@handles(API_KEY, "0-5")
async def list_groups(broker: BrokerContext, request: Request[ListGroupsRequest],
                      connection: RequestContext) -> ListGroupsResponse:
    version, body = request.api_version, request.body
    states = set(body.states_filter) if version >= 4 else set()
    types = set(body.types_filter) if version >= 5 else set()
    try:
        groups = broker.groups.list_groups(states, types)
    except GroupError as exc:
        return ListGroupsResponse(throttle_time_ms=0, error_code=exc.error_code, groups=[])
    # Only the groups one may DESCRIBE (all of them with DESCRIBE on the cluster), as Kafka lists them.
    every = allowed_on_cluster(broker, connection, Operation.DESCRIBE)
    return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=[
        _Listed(group_id=g.group_id, protocol_type=SHARE_TYPE, group_state=g.state.value, group_type=SHARE_TYPE)
        if isinstance(g, ShareGroup) else
        _Listed(group_id=g.group_id, protocol_type=CONSUMER_TYPE, group_state=g.state.value, group_type=CONSUMER_TYPE)
        if isinstance(g, ConsumerGroup) else
        _Listed(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state.value,
                group_type=GROUP_TYPE) for g in groups
        if every or allowed(broker, connection, Operation.DESCRIBE, ResourceType.GROUP, g.group_id)])
