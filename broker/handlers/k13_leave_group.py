"""LeaveGroup (key 13), versions 0-5; v3+ takes a batch of members, each with an optional
GroupInstanceId (KIP-345), and answers per member.

A leaving member is removed at once; a Stable or CompletingRebalance group rebalances, one that is
preparing a rebalance may complete it. A member that got MEMBER_ID_REQUIRED but never rejoined can
leave too. An empty member id with a GroupInstanceId removes that static member (the admin path).
Leaving a KIP-848 consumer group (any member; the admin path by instance id) may turn it classic
(broker/group/consumer_migration.py). v0-2 answer the member's error at the top level; v3+ answer
NONE at the top and an error per member.

Errors: NONE, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (unknown group or member), FENCED_INSTANCE_ID,
COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import LeaveGroupRequest, LeaveGroupResponse

API_KEY = ApiKey.LEAVE_GROUP
_MemberResponse = LeaveGroupResponse.MemberResponse


@handles(API_KEY, "0-5")
async def leave_group(broker: BrokerContext, request: Request[LeaveGroupRequest],
                      connection: RequestContext) -> LeaveGroupResponse:
    version, body = request.api_version, request.body
    if not allowed(broker, connection, Operation.READ, ResourceType.GROUP, body.group_id):
        return LeaveGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [(body.member_id, None)]
    error, errors = await broker.groups.leave_group(body.group_id, leaving)
    if version < 3:
        if error == ErrorCode.NONE:
            error = next((e for e in errors if e != ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
    members = [_MemberResponse(member_id=m, group_instance_id=i, error_code=e)
               for (m, i), e in zip(leaving, errors, strict=True)] if error == ErrorCode.NONE else []
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=members)
