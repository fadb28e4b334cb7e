"""ShareGroupDescribe (key 77), version 1 (KIP-932).

Per share group: its state (Empty or Stable), group epoch, assignment epoch, assignor ("simple") and
members with rack, epoch, client id and host, subscribed topics and the partitions each holds (topic id,
name, partitions). A group that does not exist is GROUP_ID_NOT_FOUND "Group <id> not found.", a classic
group's id GROUP_ID_NOT_FOUND "Group <id> is not a share group.", an empty id INVALID_GROUP_ID.
Needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED). The answer lists the refused groups first,
then the empty ids, then the others in the order asked (Kafka orders those by __consumer_offsets
partition: the same for one group). AuthorizedOperations when asked for: the
group operations the caller may perform, else INT32_MIN.

Errors: NONE, GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED, COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from broker.group.member_group import Assignment
from broker.group.share_group import ASSIGNOR_NAME, ShareGroup
from broker.handlers import BrokerContext, handles
from broker.handlers.acl_operations import GROUP_OPERATIONS, NOT_REQUESTED, authorized
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ShareGroupDescribeRequest, ShareGroupDescribeResponse

API_KEY = ApiKey.SHARE_GROUP_DESCRIBE
_Described = ShareGroupDescribeResponse.DescribedGroup
_Member = _Described.Member
_Assignment = _Member.Assignment
_Topic = _Assignment.TopicPartitions


def _entry(group_id: str, error: ErrorCode = ErrorCode.NONE, message: str | None = None) -> _Described:
    return _Described(error_code=error, error_message=message, group_id=group_id, group_state="", group_epoch=0,
                      assignment_epoch=0, assignor_name="", members=[], authorized_operations=NOT_REQUESTED)


@handles(API_KEY, "1")
async def share_group_describe(broker: BrokerContext, request: Request[ShareGroupDescribeRequest],
                               connection: RequestContext) -> ShareGroupDescribeResponse:
    body = request.body
    # Kafka's order: the groups one may not describe, then empty ids, then the others (as asked).
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
        group = groups.share.groups.get(group_id)
        if group is None:
            message = (f"Group {group_id} is not a share group." if group_id in groups.registry.groups
                       else f"Group {group_id} not found.")
            answers.append(_entry(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message))
            continue
        entry = _described(broker, group)
        if body.include_authorized_operations:
            entry.authorized_operations = authorized(broker, connection, ResourceType.GROUP, group_id,
                                                     GROUP_OPERATIONS)
        answers.append(entry)
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=refused + invalid + answers)


def _described(broker: BrokerContext, group: ShareGroup) -> _Described:
    entry = _entry(group.group_id)
    entry.group_state, entry.group_epoch = group.state.value, group.group_epoch
    entry.assignment_epoch, entry.assignor_name = group.assignment_epoch, ASSIGNOR_NAME
    entry.members = [
        _Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=list(m.subscribed),
                assignment=_Assignment(topic_partitions=_topics(broker, m.assignment)))
        for m in group.members.values()]
    return entry


def _topics(broker: BrokerContext, assignment: Assignment) -> list[_Topic]:
    named = []
    for topic_id, parts in assignment.items():
        topic = broker.topics.by_id(topic_id)
        if topic is not None:  # a topic deleted since: gone at the next assignment
            named.append(_Topic(topic_id=topic_id, topic_name=topic.name, partitions=sorted(parts)))
    return named
