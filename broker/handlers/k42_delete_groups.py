"""DeleteGroups (key 42), versions 0-2.

Deletes Empty groups: tombstones for every committed offset and for the group metadata are written
to `__consumer_offsets`, then the group is gone (Dead). A group with members (or a member that got
MEMBER_ID_REQUIRED and may still rejoin) is NON_EMPTY_GROUP; an unknown group GROUP_ID_NOT_FOUND.
A group named twice is answered once. A deleted share group's share-partition states go first, as in
Kafka (broker/group/share_groups.py delete): when a share coordinator cannot delete some of them the
group's answer is that error and the group stays.

Errors: NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse

API_KEY = ApiKey.DELETE_GROUPS
_Result = DeleteGroupsResponse.DeletableGroupResult


@handles(API_KEY, "0-2")
async def delete_groups(broker: BrokerContext, request: Request[DeleteGroupsRequest],
                        connection: RequestContext) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(request.body.groups_names))
    permitted = [n for n in names if allowed(broker, connection, Operation.DELETE, ResourceType.GROUP, n)]
    results = await broker.groups.delete_groups(permitted) if permitted else {}
    results.update({n: ErrorCode.GROUP_AUTHORIZATION_FAILED for n in names if n not in permitted})
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        _Result(group_id=name, error_code=results[name]) for name in names])
