"""JoinGroup (key 11), versions 0-9. The rules are broker/group/coordinator.py's (Kafka's classic
protocol); this module maps the versions.

- v0 has no rebalance timeout: the session timeout serves as both;
- v4+: a first join with an empty member id is answered MEMBER_ID_REQUIRED with the id to rejoin with
  (KIP-394); v0-3 members are admitted at once;
- v5+: GroupInstanceId makes a static member (KIP-345);
- v7+: ProtocolType in the answer, ProtocolName null when there is none (an empty string before v7);
- v9: SkipAssignment for a static leader replaced while Stable (KIP-814).
The answer is held until the join phase ends (all members rejoined, the rebalance timeout, or the
initial rebalance delay of a new group). Only the leader gets the members' metadata. Generations
start at 1. Member ids are `<client.id>-<uuid>` (`<group.instance.id>-<uuid>` for static members).

A JoinGroup for a KIP-848 consumer group with members joins it as a classic member
(broker/group/consumer_classic.py: no leader, its generation its member epoch), as Kafka 4.3.1 does.

Errors: NONE, INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT (outside group.min/max.session.timeout.ms),
MEMBER_ID_REQUIRED, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL (another
protocol type, or no protocol every member supports), REBALANCE_IN_PROGRESS (a newer JoinGroup of the
same member replaced this one), COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (the broker is stopping),
and the append errors of the group metadata write.
"""

from __future__ import annotations

from broker.group import JoinRequest
from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import JoinGroupRequest, JoinGroupResponse

API_KEY = ApiKey.JOIN_GROUP
_Member = JoinGroupResponse.JoinGroupResponseMember


@handles(API_KEY, "0-9")
async def join_group(broker: BrokerContext, request: Request[JoinGroupRequest],
                     connection: RequestContext) -> JoinGroupResponse:
    version, body = request.api_version, request.body
    if not allowed(broker, connection, Operation.READ, ResourceType.GROUP, body.group_id):
        return JoinGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    protocols: list[tuple[str, bytes]] = []
    for protocol in body.protocols:
        if all(name != protocol.name for name, _ in protocols):  # a map keyed by name: the first wins
            protocols.append((protocol.name, bytes(protocol.metadata)))
    result = await broker.groups.join_group(JoinRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        group_instance_id=body.group_instance_id if version >= 5 else None,
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms,
        protocol_type=body.protocol_type,
        protocols=protocols,
        client_id=request.header.client_id or "",
        client_host="/" + connection.client_host,
        version=version,
        reason=body.reason if version >= 8 else None,
    ))
    protocol_name = result.protocol_name
    if version < 7 and protocol_name is None:
        protocol_name = ""
    elif version >= 7 and protocol_name == "":
        protocol_name = None
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[_Member(member_id=m, group_instance_id=i, metadata=md) for m, i, md in result.members],
    )
