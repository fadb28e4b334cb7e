"""SyncGroup (key 14), versions 0-5.

The leader sends every member's assignment; it is written to `__consumer_offsets` (group metadata)
and then each member gets its own, and the group is Stable. Followers wait for that (their answer
is held); a member syncing a Stable group gets its assignment at once. Members missing from the
leader's list get an empty assignment. A classic member of a KIP-848 consumer group gets its partitions
from the group's server-side assignment (broker/group/consumer_classic.py). v3+ carries
GroupInstanceId; v5+ carries ProtocolType and ProtocolName, which must match the group's
(INCONSISTENT_GROUP_PROTOCOL), and returns them.

Errors: NONE, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (unknown group or member, or an Empty group),
FENCED_INSTANCE_ID, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, REBALANCE_IN_PROGRESS (the group
is rebalancing, or started again while this member waited), COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR, and the append errors of the group metadata write.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import SyncGroupRequest, SyncGroupResponse

API_KEY = ApiKey.SYNC_GROUP


@handles(API_KEY, "0-5")
async def sync_group(broker: BrokerContext, request: Request[SyncGroupRequest],
                     connection: RequestContext) -> SyncGroupResponse:
    version, body = request.api_version, request.body
    if not allowed(broker, connection, Operation.READ, ResourceType.GROUP, body.group_id):
        return SyncGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    result = await broker.groups.sync_group(
        body.group_id, body.generation_id, body.member_id,
        body.group_instance_id if version >= 3 else None,
        body.protocol_type if version >= 5 else None,
        body.protocol_name if version >= 5 else None,
        [(a.member_id, bytes(a.assignment)) for a in body.assignments],
    )
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)
