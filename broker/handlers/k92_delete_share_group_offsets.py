"""DeleteShareGroupOffsets (key 92), version 0 (KIP-932; `kafka-share-groups --delete-offsets`): an
Empty share group forgets its state for whole topics; a later ShareFetch starts them again where
share.auto.offset.reset says. Needs DELETE on the group and READ on each topic.

Errors: NONE, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (top level); TOPIC_AUTHORIZATION_FAILED,
UNKNOWN_TOPIC_OR_PARTITION, and the share coordinator's error when a partition's stored state could not
be deleted (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, ...: that state stays, try again) (per topic).
"""

from __future__ import annotations

import uuid

from broker.group.group import GroupError
from broker.handlers import BrokerContext, handles
from broker.handlers.share_requests import empty_share_group, topic_refusal
from broker.request_context import RequestContext
from broker.share.partition import ShareError
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse

API_KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS
_Topic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic


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
    answers = []
    for asked in body.topics:
        topic = broker.topics.get(asked.topic_name)
        error = topic_refusal(broker, connection, asked.topic_name, Operation.READ) or ErrorCode.NONE
        if error == ErrorCode.NONE and topic is not None:  # the state's deletion failed: that topic says why
            error = (await broker.shares.forget(body.group_id, [topic]))[topic.name]
            if error == ErrorCode.NONE:  # record 15: initialized again when next subscribed
                try:
                    await broker.groups.share.states_deleted(body.group_id, {topic.topic_id})
                except GroupError as exc:
                    error = exc.error_code
        answers.append(_Topic(topic_name=asked.topic_name, topic_id=topic.topic_id if topic else uuid.UUID(int=0),
                              error_code=error, error_message=None))
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                           responses=answers)
