"""ShareGroupHeartbeat (key 76), version 1 (KIP-932, the member id the consumer's own: KIP-1082).

A share consumer joins with epoch 0 and its subscribed topics, heartbeats with the epoch it was last
given, and leaves with -1 (answered with interval 0). The answer carries the member's epoch, the
heartbeat interval (the group's share.heartbeat.interval.ms, else the broker's
group.share.heartbeat.interval.ms) and, when the member just joined, sent its subscribed topics or its
partitions changed, its assignment by topic id. A member silent for the group's share.session.timeout.ms
is removed. The rules are broker/group/share_groups.py's; the group's changed records are appended to __consumer_offsets
before the answer (a failed append answers the coordinator's error instead, the change undone). Needs READ on the group
(GROUP_AUTHORIZATION_FAILED); with an authorizer, subscribing to a topic one may not DESCRIBE is
TOPIC_AUTHORIZATION_FAILED, as Kafka checks it.

Errors: NONE, INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_ID_NOT_FOUND,
GROUP_MAX_SIZE_REACHED, GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID.
"""

from __future__ import annotations

from broker.cluster.store import StoreError
from broker.group import GroupError
from broker.group.share_groups import ShareHeartbeat
from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

API_KEY = ApiKey.SHARE_GROUP_HEARTBEAT
_Assignment = ShareGroupHeartbeatResponse.Assignment
_Topic = _Assignment.TopicPartitions


def _refused(error: ErrorCode, message: str | None = None) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                       member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)


@handles(API_KEY, "1")
async def share_group_heartbeat(broker: BrokerContext, request: Request[ShareGroupHeartbeatRequest],
                                connection: RequestContext) -> ShareGroupHeartbeatResponse:
    body = request.body
    if not allowed(broker, connection, Operation.READ, ResourceType.GROUP, body.group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if body.subscribed_topic_names and broker.authorizer is not None:
        hidden = sorted(n for n in set(body.subscribed_topic_names)
                        if not allowed(broker, connection, Operation.DESCRIBE, ResourceType.TOPIC, n))
        if hidden:
            return _refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            f"The following topics are not authorized: {', '.join(hidden)}.")
    groups = broker.groups
    if (error := groups.registry.not_served(body.group_id)) is not None:
        return _refused(error)
    try:
        timeouts = await broker.group_configs.member_timeouts(body.group_id, "share")
    except StoreError:
        return _refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The group's configs cannot be read now.")
    try:
        answer = await groups.share.heartbeat(ShareHeartbeat(
            body.group_id, body.member_id, body.member_epoch, body.rack_id, body.subscribed_topic_names,
            request.header.client_id or "", "/" + connection.client_host), timeouts)
    except GroupError as exc:
        return _refused(exc.error_code, exc.message)
    assignment = None if answer.assignment is None else _Assignment(topic_partitions=[
        _Topic(topic_id=topic_id, partitions=sorted(parts)) for topic_id, parts in answer.assignment.items()])
    return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                       member_id=answer.member_id, member_epoch=answer.member_epoch,
                                       heartbeat_interval_ms=0 if answer.left else timeouts.heartbeat_interval_ms,
                                       assignment=assignment)
