"""ConsumerGroupDescribe (key 69), versions 0-1 (KIP-848).

Per consumer group: its state (Empty, Assigning, Reconciling, Stable), group epoch, assignment epoch,
assignor and members with instance id, rack, epoch, client id and host, subscription (names and regex),
the partitions each holds and its target (topic id, name, partitions); v1 adds MemberType (1: consumer,
0: a classic member in the group).
A group that does not exist is GROUP_ID_NOT_FOUND "Group <id> not found.", a classic or share group's id
GROUP_ID_NOT_FOUND "Group <id> is not a consumer group.", an empty id INVALID_GROUP_ID. Needs DESCRIBE
on the group (GROUP_AUTHORIZATION_FAILED), and DESCRIBE on every topic the group's members subscribe to,
hold or are to hold, else the group is TOPIC_AUTHORIZATION_FAILED with nothing of it shown (Kafka 4.x,
KAFKA-18813). The answer lists the refused groups first, then the empty
ids, then the others in the order asked. AuthorizedOperations when asked for: the group operations the
caller may perform, else INT32_MIN. With the cluster's group.version at 0 (broker/features.py) each
group asked is UNSUPPORTED_VERSION, in the order asked and before any check, as Kafka 4.3.1 answers.

Errors: NONE, UNSUPPORTED_VERSION, GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED,
TOPIC_AUTHORIZATION_FAILED, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from broker.group.consumer_group import (
    MEMBER_TYPE_CLASSIC,
    MEMBER_TYPE_CONSUMER,
    ConsumerGroup,
    ConsumerMember,
)
from broker.group.member_group import Assignment
from broker.handlers import BrokerContext, handles
from broker.handlers.acl_operations import GROUP_OPERATIONS, NOT_REQUESTED, authorized
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
_Described = ConsumerGroupDescribeResponse.DescribedGroup
_Member = _Described.Member
_Assignment = _Member.Assignment
_Topic = _Assignment.TopicPartitions


def _entry(group_id: str, error: ErrorCode = ErrorCode.NONE, message: str | None = None) -> _Described:
    return _Described(error_code=error, error_message=message, group_id=group_id, group_state="", group_epoch=0,
                      assignment_epoch=0, assignor_name="", members=[], authorized_operations=NOT_REQUESTED)


@handles(API_KEY, "0-1")
async def consumer_group_describe(broker: BrokerContext, request: Request[ConsumerGroupDescribeRequest],
                                  connection: RequestContext) -> ConsumerGroupDescribeResponse:
    body = request.body
    if not broker.features.consumer_groups_enabled:
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
            _entry(group_id, ErrorCode.UNSUPPORTED_VERSION) for group_id in body.group_ids])
    refused, invalid, answers = [], [], []
    for group_id in body.group_ids:
        if not allowed(broker, connection, Operation.DESCRIBE, ResourceType.GROUP, group_id):
            refused.append(_entry(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        if not group_id:
            invalid.append(_entry(group_id, ErrorCode.INVALID_GROUP_ID))
            continue
        groups = broker.groups
        if (error := groups.registry.not_served(group_id)) is not None:
            answers.append(_entry(group_id, error))
            continue
        group = groups.consumer.groups.get(group_id)
        if group is None:
            other = group_id in groups.registry.groups or group_id in groups.share.groups
            answers.append(_entry(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                  f"Group {group_id} is not a consumer group." if other
                                  else f"Group {group_id} not found."))
            continue
        entry = _described(broker, group)
        if broker.authorizer is not None and not all(
                allowed(broker, connection, Operation.DESCRIBE, ResourceType.TOPIC, name) for name in _named(entry)):
            # KAFKA-18813: a group naming a topic the caller may not DESCRIBE is not shown at all.
            answers.append(_entry(group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  "The group has described topic(s) that the client is not authorized to describe."))
            continue
        if body.include_authorized_operations:
            entry.authorized_operations = authorized(broker, connection, ResourceType.GROUP, group_id,
                                                     GROUP_OPERATIONS)
        answers.append(entry)
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=refused + invalid + answers)


def _described(broker: BrokerContext, group: ConsumerGroup) -> _Described:
    entry = _entry(group.group_id)
    entry.group_state, entry.group_epoch = group.state.value, group.group_epoch
    entry.assignment_epoch = group.assignment_epoch
    entry.assignor_name = broker.groups.consumer.assignor_of(group)
    entry.members = [
        _Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.epoch,
                client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed),
                subscribed_topic_regex=m.regex or "",  # Kafka: "" without one
                assignment=_Assignment(topic_partitions=_topics(broker, _held(m))),
                target_assignment=_Assignment(topic_partitions=_topics(broker, group.target.get(m.member_id, {}))),
                member_type=MEMBER_TYPE_CONSUMER if m.classic is None else MEMBER_TYPE_CLASSIC)
        for m in group.members.values()]
    return entry


def _named(entry: _Described) -> set[str]:
    """The topics the description names: subscriptions, assignments and targets."""
    names: set[str] = set()
    for member in entry.members:
        names.update(member.subscribed_topic_names)
        for assignment in (member.assignment, member.target_assignment):
            names.update(t.topic_name for t in assignment.topic_partitions)
    return names


def _held(member: ConsumerMember) -> Assignment:
    """What the member owns: its partitions and those it has still to revoke (Kafka's answer)."""
    held = {t: set(p) for t, p in member.assigned.items()}
    for t, parts in member.pending_revocation.items():
        held.setdefault(t, set()).update(parts)
    return held


def _topics(broker: BrokerContext, assignment: Assignment) -> list[_Topic]:
    named = []
    for topic_id, parts in assignment.items():
        topic = broker.topics.by_id(topic_id)
        if topic is not None:  # a topic deleted since: gone at the next assignment
            named.append(_Topic(topic_id=topic_id, topic_name=topic.name, partitions=sorted(parts)))
    return named
