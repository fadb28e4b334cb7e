"""DescribeGroups (key 15), versions 0-6.

Per group: state, protocol type, the protocol in use (only while Stable, else ""), and the members
with client id and host ("/<address>", as Kafka prints it); their metadata and assignment are filled
in only while Stable. v4+ adds members' GroupInstanceId. A group that does not exist is described
as Dead with no members and NONE before v6; v6 answers GROUP_ID_NOT_FOUND with a message (KIP-1043).
AuthorizedOperations (v3+): INT32_MIN unless asked for, then those of READ, DESCRIBE, DELETE,
DESCRIBE_CONFIGS and ALTER_CONFIGS the caller may do on the group (all of them without an authorizer;
the bits Kafka 4.3.1 answers: tests/differential/test_security_against_kafka.py). With an authorizer a
group needs DESCRIBE, else GROUP_AUTHORIZATION_FAILED; those groups come first in the answer, then the
others in the order asked, as Kafka's KafkaApis answers.
A share group's or a KIP-848 consumer group's id (ConsumerGroupDescribe describes those) is described
as Dead, with GROUP_ID_NOT_FOUND "Group <id> is not a classic group." at v6 (NONE before), as Kafka
answers it.

Errors: NONE, GROUP_ID_NOT_FOUND (v6), COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from broker.group import GroupError, GroupState
from broker.group.consumer_group import ConsumerGroup
from broker.group.share_group import ShareGroup
from broker.handlers import BrokerContext, handles
from broker.handlers.acl_operations import GROUP_OPERATIONS, NOT_REQUESTED, authorized
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeGroupsRequest, DescribeGroupsResponse

API_KEY = ApiKey.DESCRIBE_GROUPS
_Described = DescribeGroupsResponse.DescribedGroup
_Member = _Described.DescribedGroupMember


@handles(API_KEY, "0-6")
async def describe_groups(broker: BrokerContext, request: Request[DescribeGroupsRequest],
                          connection: RequestContext) -> DescribeGroupsResponse:
    version, body = request.api_version, request.body
    wanted = version >= 3 and body.include_authorized_operations
    refused, described = [], []
    for group_id in body.groups:
        entry = _Described(error_code=ErrorCode.NONE, error_message=None, group_id=group_id, group_state="",
                           protocol_type="", protocol_data="", members=[], authorized_operations=NOT_REQUESTED)
        if not allowed(broker, connection, Operation.DESCRIBE, ResourceType.GROUP, group_id):
            entry.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            refused.append(entry)
            continue
        described.append(entry)
        try:
            group = broker.groups.describe_group(group_id)
        except GroupError as exc:
            entry.error_code = exc.error_code
            if version >= 6:  # ErrorMessage exists from v6
                entry.error_message = exc.message
            continue
        if wanted:
            entry.authorized_operations = authorized(broker, connection, ResourceType.GROUP, group_id, GROUP_OPERATIONS)
        if group is None or isinstance(group, (ShareGroup, ConsumerGroup)):
            entry.group_state = GroupState.DEAD.value
            if version >= 6:
                entry.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                entry.error_message = (f"Group {group_id} not found." if group is None
                                       else f"Group {group_id} is not a classic group.")
            continue
        stable = group.is_in(GroupState.STABLE)
        entry.group_state = group.state.value
        entry.protocol_type = group.protocol_type or ""
        entry.protocol_data = (group.protocol_name or "") if stable else ""
        entry.members = [
            _Member(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, member_metadata=m.metadata(group.protocol_name) if stable else b"",
                    member_assignment=m.assignment)  # the last one synced, in every state (as Kafka)
            for m in group.members.values()]
    return DescribeGroupsResponse(throttle_time_ms=0, groups=refused + described)
