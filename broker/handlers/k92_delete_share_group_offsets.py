"""DeleteShareGroupOffsets (key 92), version 0 (KIP-932; `kafka-share-groups --delete-offsets`): an
Empty share group forgets its state for whole topics; a later ShareFetch starts them again where
share.auto.offset.reset says. Needs DELETE on the group and READ on each topic. The group coordinator
(broker/group/share_groups.py delete_offsets) follows Kafka's order: the topics listed as deleting in
record 15, their states deleted, then taken off that list; a topic without state (never initialized,
or already deleted) is UNKNOWN_TOPIC_OR_PARTITION, and a group that never had state answers no topic.
Answered as Kafka orders it: topics not readable, the deleted ones, those without state, then those a
share coordinator refused.

Errors: NONE, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (top level, also a record 15 write's error);
TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, and the share coordinator's error when a
partition's stored state could not be deleted (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, ...: the topic
stays deleting, try again) (per topic).
"""

from __future__ import annotations

import uuid

from broker.group.group import GroupError
from broker.handlers import BrokerContext, handles
from broker.handlers.share_requests import empty_share_group
from broker.request_context import RequestContext
from broker.security.access import allowed
from broker.share.partition import ShareError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse

API_KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS
_Topic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic
_NO_ID = uuid.UUID(int=0)


def _refused(error: ErrorCode, message: str | None = None) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=error, error_message=message, responses=[])


@handles(API_KEY, "0")
async def delete_share_group_offsets(broker: BrokerContext, request: Request[DeleteShareGroupOffsetsRequest],
                                     connection: RequestContext) -> DeleteShareGroupOffsetsResponse:
    body = request.body
    try:
        await empty_share_group(broker, connection, body.group_id, Operation.DELETE, create=False)
    except ShareError as exc:
        return _refused(exc.error_code, exc.message or None)
    # Topics the client may not read are answered first, as Kafka's KafkaApis does; the coordinator the rest.
    answers, asked = [], []
    for topic in body.topics:
        if allowed(broker, connection, Operation.READ, ResourceType.TOPIC, topic.topic_name):
            asked.append(topic.topic_name)
        else:
            answers.append(_Topic(topic_name=topic.topic_name, topic_id=_NO_ID,
                                  error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None))
    if asked:
        try:
            deleted = await broker.groups.share.delete_offsets(body.group_id, asked)
        except GroupError as exc:
            return _refused(exc.error_code, exc.message or None)
        answers += [_Topic(topic_name=d.name, topic_id=d.topic_id or _NO_ID, error_code=d.error,
                           error_message=d.message) for d in deleted]
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                           responses=answers)
