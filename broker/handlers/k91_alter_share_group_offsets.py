"""AlterShareGroupOffsets (key 91), version 0 (KIP-932; `kafka-share-groups --reset-offsets`): sets
the share-partition start offset of an Empty share group's partitions, nothing in flight; a group
that does not exist is made (Empty) first. As Kafka's group coordinator: the partitions are written as
initializing in the group's record 15, their share coordinators (broker/share/, on any broker) initialize
them at those start offsets under the group epoch (InitializeShareGroupState), and once all are, record 15
says initialized. A leader here reads the state again; one elsewhere learns of it through the state epoch
(docs/features.md, "Share group gaps").
Needs READ on the group and on each topic.

Errors: NONE, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND (a classic group's id), GROUP_AUTHORIZATION_FAILED,
INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (top level); TOPIC_AUTHORIZATION_FAILED,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (a negative offset), and the share coordinator's errors
(FENCED_STATE_EPOCH, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) (per partition).
"""

from __future__ import annotations

import uuid

import structlog

from broker.group.group import GroupError
from broker.handlers import BrokerContext, handles
from broker.handlers.share_requests import empty_share_group, topic_refusal
from broker.request_context import RequestContext
from broker.share.partition import ShareError
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse

log = structlog.get_logger("share")
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
    starts: dict[tuple[uuid.UUID, int], int] = {}
    entries: dict[tuple[uuid.UUID, int], _Partition] = {}
    asked: dict[uuid.UUID, tuple[str, set[int]]] = {}
    for topic_asked in body.topics:
        topic = broker.topics.get(topic_asked.topic_name)
        answer = _Topic(topic_name=topic_asked.topic_name, topic_id=topic.topic_id if topic else uuid.UUID(int=0),
                        partitions=[])
        answers.append(answer)
        refused = topic_refusal(broker, connection, topic_asked.topic_name, Operation.READ)
        for part in topic_asked.partitions:
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
            where = (topic.topic_id, part.partition_index)
            starts[where] = part.start_offset
            entries[where] = entry
            asked.setdefault(topic.topic_id, (topic.name, set()))[1].add(part.partition_index)
    try:  # record 15 first: these partitions are being initialized
        epoch = await broker.groups.share.states_altering(body.group_id, asked)
    except GroupError as exc:
        return _refused(exc.error_code, exc.message or None)
    errors = await broker.shares.set_starts(body.group_id, epoch, starts) if starts else {}
    for where, error in errors.items():
        if error != ErrorCode.NONE:
            entries[where].error_code, entries[where].error_message = error, error.name
    if all(error == ErrorCode.NONE for error in errors.values()):
        try:  # then initialized, as Kafka writes it after the answer's states are stored
            await broker.groups.share.states_set(body.group_id, {t: parts for t, (_, parts) in asked.items()})
        except GroupError as exc:  # left initializing: a subscribing heartbeat asks again, as on Kafka
            log.warning("altered share group offsets not written initialized", group=body.group_id,
                        error=exc.error_code.name)
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                          responses=answers)
