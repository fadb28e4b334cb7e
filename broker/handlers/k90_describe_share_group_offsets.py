"""DescribeShareGroupOffsets (key 90), versions 0-1 (KIP-932; what `kafka-share-groups --describe` asks):
per share group, each partition's share-partition start offset, the leader epoch and, from v1, the lag
(KIP-1226: records from the start offset to the high watermark not finished with). Topics null: every
partition the group has state for; a named partition without state answers start offset -1, and a group
that does not exist no partitions (NONE), as Kafka answers. The state is the partition leader's in
memory when led here, else its share coordinator's summary (ReadShareGroupStateSummary when the
coordinator is another broker, broker/share/persister.py): every partition is seen, on any broker;
the lag of a partition with no replica here is -1 (docs/features.md, "Share group gaps").
Needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) and on each topic
(TOPIC_AUTHORIZATION_FAILED).

Errors: NONE, GROUP_ID_NOT_FOUND (a classic group's id), GROUP_AUTHORIZATION_FAILED,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS (per group);
TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION (per partition).
"""

from __future__ import annotations

import uuid

from broker.group import GroupError
from broker.handlers import BrokerContext, handles
from broker.handlers.share_requests import topic_refusal
from broker.request_context import RequestContext
from broker.security.access import allowed
from broker.share.manager import Described, ShareStateError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse

API_KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
_Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
_Topic = _Group.DescribeShareGroupOffsetsResponseTopic
_Partition = _Topic.DescribeShareGroupOffsetsResponsePartition


@handles(API_KEY, "0-1")
async def describe_share_group_offsets(broker: BrokerContext, request: Request[DescribeShareGroupOffsetsRequest],
                                       connection: RequestContext) -> DescribeShareGroupOffsetsResponse:
    answers = []
    for asked in request.body.groups:
        group = _Group(group_id=asked.group_id, topics=[], error_code=ErrorCode.NONE, error_message=None)
        answers.append(group)
        if not allowed(broker, connection, Operation.DESCRIBE, ResourceType.GROUP, asked.group_id):
            group.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        try:
            broker.groups.registry.check_served(asked.group_id)
        except GroupError as exc:
            group.error_code, group.error_message = exc.error_code, exc.message
            continue
        if asked.group_id in broker.groups.registry.groups:  # one id, one type
            group.error_code = ErrorCode.GROUP_ID_NOT_FOUND
            group.error_message = f"Group {asked.group_id} is not a share group."
            continue
        if asked.topics is None:  # internal topics are never shared
            try:
                known = await broker.shares.group_state(asked.group_id,
                                                        [t for t in broker.topics.all() if not t.internal])
            except ShareStateError as exc:
                group.error_code = exc.error_code
                continue
            wanted: dict[str, list[int]] = {}
            for name, index in known:
                wanted.setdefault(name, []).append(index)
        else:
            known = None
            wanted = {t.topic_name: list(t.partitions) for t in asked.topics}
        group.topics = await _describe_topics(broker, connection, asked.group_id, wanted, known)
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=answers)


async def _describe_topics(broker: BrokerContext, connection: RequestContext, group_id: str,
                           wanted: dict[str, list[int]],
                           known: dict[tuple[str, int], Described] | None) -> list[_Topic]:
    """The topics' answers, every partition's state described at once (one summary request per share
    coordinator for the partitions led elsewhere), or taken from `known` when already described."""
    answers, asked = [], []
    for name, indexes in wanted.items():
        topic = broker.topics.get(name)
        answer = _Topic(topic_name=name, topic_id=topic.topic_id if topic is not None else uuid.UUID(int=0),
                        partitions=[])
        answers.append(answer)
        refused = topic_refusal(broker, connection, name, Operation.DESCRIBE)
        for index in indexes:
            # a partition without state: start offset -1, leader epoch 0 (Kafka's answer)
            entry = _Partition(partition_index=index, start_offset=-1, leader_epoch=0, lag=-1,
                               error_code=ErrorCode.NONE, error_message=None)
            answer.partitions.append(entry)
            if refused is not None:
                entry.error_code = refused
            elif topic is None or index not in topic.replicas:
                entry.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                asked.append((topic, index, entry))
    described = known if known is not None else \
        await broker.shares.described(group_id, [(topic, index) for topic, index, _ in asked])
    for topic, index, entry in asked:
        state = described[(topic.name, index)]
        if isinstance(state, ErrorCode):
            entry.error_code = state
        elif state is not None:
            entry.start_offset, entry.leader_epoch, entry.lag = state
    return answers
