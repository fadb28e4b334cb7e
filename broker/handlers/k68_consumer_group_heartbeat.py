"""ConsumerGroupHeartbeat (key 68), versions 0-1 (KIP-848; v1, KIP-1082: the member id is the client's).

A consumer joins with epoch 0, its subscription (topic names or an RE2J regex) and rebalance timeout,
heartbeats with the epoch it was last given and the partitions it holds, and leaves with -1 (a static
member with -2, keeping its partitions for its instance id until its session ends). The answer carries
the member's epoch, the heartbeat interval (the group's consumer.heartbeat.interval.ms, else the broker's
group.consumer.heartbeat.interval.ms; 0 when leaving) and, when it joined, sent a full request or its
partitions changed, its assignment by topic id. A member silent for consumer.session.timeout.ms is
removed. The rules are broker/group/consumer_groups.py's; the group's changed records are appended to
__consumer_offsets before the answer (a failed append answers the coordinator's error instead, the
change undone). Needs READ on the group
(GROUP_AUTHORIZATION_FAILED); with an authorizer, subscribing by name to a topic one may not DESCRIBE
is TOPIC_AUTHORIZATION_FAILED, as Kafka checks it. With the cluster's group.version at 0
(broker/features.py) every heartbeat is UNSUPPORTED_VERSION before any check, as Kafka 4.3.1 answers
while the API stays advertised.

Errors: NONE, UNSUPPORTED_VERSION, INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_ID_NOT_FOUND, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR,
INVALID_REGULAR_EXPRESSION, GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID.
"""

from __future__ import annotations

import base64
import uuid

from broker.cluster.store import StoreError
from broker.group import GroupError
from broker.group.consumer_groups import ConsumerHeartbeat
from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
_Assignment = ConsumerGroupHeartbeatResponse.Assignment
_Topic = _Assignment.TopicPartitions


def _refused(error: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                          member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)


@handles(API_KEY, "0-1")
async def consumer_group_heartbeat(broker: BrokerContext, request: Request[ConsumerGroupHeartbeatRequest],
                                   connection: RequestContext) -> ConsumerGroupHeartbeatResponse:
    body = request.body
    if not broker.features.consumer_groups_enabled:
        return _refused(ErrorCode.UNSUPPORTED_VERSION)
    if not allowed(broker, connection, Operation.READ, ResourceType.GROUP, body.group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if body.subscribed_topic_names and broker.authorizer is not None:
        hidden = sorted(n for n in set(body.subscribed_topic_names)
                        if not allowed(broker, connection, Operation.DESCRIBE, ResourceType.TOPIC, n))
        if hidden:
            return _refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            f"The following topics are not authorized: {', '.join(hidden)}.")
    member_id = body.member_id
    if request.api_version == 0 and not member_id and body.member_epoch == 0:
        # v0 lets the coordinator choose the id: a random UUID as Kafka prints one (base64url, no padding).
        member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    groups = broker.groups
    if (error := groups.registry.not_served(body.group_id)) is not None:
        return _refused(error)
    try:
        timeouts = await broker.group_configs.member_timeouts(body.group_id, "consumer")
    except StoreError:
        return _refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The group's configs cannot be read now.")
    owned = None if body.topic_partitions is None else {
        t.topic_id: set(t.partitions) for t in body.topic_partitions}
    regex = body.subscribed_topic_regex if request.api_version >= 1 else None
    try:
        answer = await groups.consumer.heartbeat_written(ConsumerHeartbeat(
            body.group_id, member_id, body.member_epoch, body.instance_id, body.rack_id,
            body.rebalance_timeout_ms, body.subscribed_topic_names, regex, body.server_assignor, owned,
            request.header.client_id or "", "/" + connection.client_host), timeouts)
    except GroupError as exc:
        return _refused(exc.error_code, exc.message)
    assignment = None if answer.assignment is None else _Assignment(topic_partitions=[
        _Topic(topic_id=topic_id, partitions=sorted(parts)) for topic_id, parts in answer.assignment.items()])
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        heartbeat_interval_ms=0 if answer.member_epoch < 0 else timeouts.heartbeat_interval_ms,
        assignment=assignment)
