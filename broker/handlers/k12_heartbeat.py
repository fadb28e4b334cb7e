"""Heartbeat (key 12), versions 0-4 (v3+ carries GroupInstanceId).

A member of the current generation pushes its session deadline out by its session timeout. While the
group prepares a rebalance the answer is REBALANCE_IN_PROGRESS: the member must rejoin. In
CompletingRebalance and Stable the answer is NONE. A classic member of a KIP-848 consumer group is told
REBALANCE_IN_PROGRESS when it must rejoin (broker/group/consumer_classic.py).

Errors: NONE, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (unknown group or member, or an Empty group),
FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import HeartbeatRequest, HeartbeatResponse

API_KEY = ApiKey.HEARTBEAT


@handles(API_KEY, "0-4")
async def heartbeat(broker: BrokerContext, request: Request[HeartbeatRequest],
                    connection: RequestContext) -> HeartbeatResponse:
    version, body = request.api_version, request.body
    if not allowed(broker, connection, Operation.READ, ResourceType.GROUP, body.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = broker.groups.heartbeat(body.group_id, body.generation_id, body.member_id,
                                    body.group_instance_id if version >= 3 else None)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
