"""AlterShareGroupOffsets (key 91), version 0 (KIP-932; `kafka-share-groups --reset-offsets`): sets
the share-partition start offset of an Empty share group's partitions, nothing in flight; a group
that does not exist is made (Empty) first. The state is written to its share coordinator
(broker/share/) under the next state epoch, for a partition led on any broker; its leader reads it
again (docs/features.md, "Share group gaps").
Needs READ on the group and on each topic.

Errors: NONE, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND (a classic group's id), GROUP_AUTHORIZATION_FAILED,
INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (top level); TOPIC_AUTHORIZATION_FAILED,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (a negative offset), COORDINATOR_NOT_AVAILABLE and
NOT_COORDINATOR (the share coordinator could not be had) (per partition).
"""

from __future__ import annotations

import uuid

from broker.group.group import GroupError
from broker.handlers import BrokerContext, handles
from broker.handlers.share_requests import empty_share_group, topic_refusal
from broker.request_context import RequestContext
from broker.share.manager import ShareStateError
from broker.share.partition import ShareError
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse

API_KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
_Topic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
_Partition = _Topic.AlterShareGroupOffsetsResponsePartition


def _refused(error: ErrorCode, message: str | None = None) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=error, error_message=message, responses=[])


@handles(API_KEY, "0")
async def alter_share_group_offsets(broker: BrokerContext, request: Request[AlterShareGroupOffsetsRequest],
                                    connection: RequestContext) -> AlterShareGroupOffsetsResponse:
    body = request.body
    try:
        await empty_share_group(broker, connection, body.group_id, Operation.READ, create=True)
    except ShareError as exc:
        return _refused(exc.error_code, exc.message or None)
    answers = []
    done: dict[uuid.UUID, tuple[str, set[int]]] = {}
    for asked in body.topics:
        topic = broker.topics.get(asked.topic_name)
        answer = _Topic(topic_name=asked.topic_name, topic_id=topic.topic_id if topic else uuid.UUID(int=0),
                        partitions=[])
        answers.append(answer)
        refused = topic_refusal(broker, connection, asked.topic_name, Operation.READ)
        for part in asked.partitions:
            entry = _Partition(partition_index=part.partition_index, error_code=ErrorCode.NONE, error_message=None)
            answer.partitions.append(entry)
            if refused is not None:
                entry.error_code = refused
                continue
            if part.start_offset < 0:
                entry.error_code = ErrorCode.INVALID_REQUEST
                continue
            assert topic is not None
            if part.partition_index not in topic.replicas:
                entry.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                await broker.shares.set_start(body.group_id, topic, part.partition_index, part.start_offset)
            except ShareStateError as exc:
                entry.error_code = exc.error_code
            else:
                done.setdefault(topic.topic_id, (topic.name, set()))[1].add(part.partition_index)
    try:  # record 15: these states are set, not to be reset by the group's next subscribing heartbeat
        await broker.groups.share.states_set(body.group_id, done)
    except GroupError as exc:
        return _refused(exc.error_code, exc.message or None)
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                          responses=answers)
