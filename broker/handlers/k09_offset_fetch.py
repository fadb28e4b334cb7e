"""OffsetFetch (key 9), versions 1-10.

Two layouts: v1-7 ask for one group (GroupId, Topics), v8+ for a list of groups (Groups[], each with
its own Topics) and answer per group. Topics null (v2+) asks for every partition the group has an
offset for. A partition without a committed offset answers offset -1, leader epoch -1, metadata ""
and NONE — so does every partition of an unknown group. RequireStable (v7+): a partition whose offset
waits for its transaction (TxnOffsetCommit before the marker) answers UNSTABLE_OFFSET_COMMIT with
offset -1, so a read_committed consumer retries until the transaction is settled; without it, the
committed offset before the transaction. v9's MemberId/MemberEpoch concern KIP-848 groups and are
ignored for classic groups. v10 (KIP-848) names topics by TopicId, asked and answered: an id no topic
has answers its partitions UNKNOWN_TOPIC_ID; a fetch of all topics gives each its id.
A coordinator error is the group's ErrorCode (v2-7 top level, v8+ per group; v1 per partition).

Errors: NONE, COORDINATOR_NOT_AVAILABLE, UNSTABLE_OFFSET_COMMIT, UNKNOWN_TOPIC_ID (v10).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from broker.group import GroupError
from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import OffsetFetchRequest, OffsetFetchResponse
from protocol.wire import ZERO_UUID

API_KEY = ApiKey.OFFSET_FETCH
_Group = OffsetFetchResponse.OffsetFetchResponseGroup
_GroupTopic = _Group.OffsetFetchResponseTopics
_GroupPartition = _GroupTopic.OffsetFetchResponsePartitions
_Topic = OffsetFetchResponse.OffsetFetchResponseTopic
_Partition = _Topic.OffsetFetchResponsePartition


def _fetch(broker: BrokerContext, connection: RequestContext, group_id: str, topics, require_stable: bool = False,
           member: tuple[str, int] = ("", -1)):
    """[(topic, [(partition, offset, leader epoch, metadata, error)])] and the group's error. With an
    authorizer the group needs DESCRIBE, and a fetch of all topics leaves out those the client may not
    DESCRIBE."""
    asked = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    try:
        if not allowed(broker, connection, Operation.DESCRIBE, ResourceType.GROUP, group_id):
            raise GroupError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "DESCRIBE on the group is needed")
        fetched = broker.groups.offsets.fetch(group_id, asked, *member)
        if asked is None:
            fetched = [(name, parts) for name, parts in fetched
                       if allowed(broker, connection, Operation.DESCRIBE, ResourceType.TOPIC, name)]
    except GroupError as exc:
        failed = [(name, [(p, -1, -1, "", ErrorCode.NONE) for p in partitions]) for name, partitions in asked or []]
        return failed, exc.error_code
    store = broker.groups.store

    def answer(name: str, p: int, c):
        if require_stable and store.has_pending(group_id, name, p):
            return p, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT
        if c is None:
            return p, -1, -1, "", ErrorCode.NONE
        return p, c.offset, c.leader_epoch, c.metadata, ErrorCode.NONE

    return [(name, [answer(name, p, c) for p, c in parts]) for name, parts in fetched], ErrorCode.NONE


def _by_id(broker: BrokerContext, topics):
    """v10's topics named by id: (the asked topics with their names, the answers for unknown ids)."""
    named, unknown = [], []
    for t in topics:
        topic = broker.topics.by_id(t.topic_id)
        if topic is None:
            unknown.append((t.topic_id, [(p, -1, -1, "", ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partition_indexes]))
        else:
            named.append(_Named(topic.name, t.partition_indexes))
    return named, unknown


@dataclass
class _Named:
    name: str
    partition_indexes: list[int]


@handles(API_KEY, "1-10")
async def offset_fetch(broker: BrokerContext, request: Request[OffsetFetchRequest],
                       connection: RequestContext) -> OffsetFetchResponse:
    version, body = request.api_version, request.body
    if version >= 8:
        groups = []
        for group in body.groups:
            member = (group.member_id or "", group.member_epoch) if version >= 9 else ("", -1)
            by_id = version >= 10 and group.topics is not None
            asked, unknown = _by_id(broker, group.topics) if by_id else (group.topics, [])
            topics, error = _fetch(broker, connection, group.group_id, asked, body.require_stable, member)
            answered = [(name, _topic_id(broker, name) if version >= 10 else ZERO_UUID, parts)
                        for name, parts in topics] + [("", topic_id, parts) for topic_id, parts in unknown]
            groups.append(_Group(group_id=group.group_id, error_code=error, topics=[] if error else [
                _GroupTopic(name=name, topic_id=topic_id, partitions=[
                    _GroupPartition(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                                    error_code=code) for p, o, e, m, code in parts])
                for name, topic_id, parts in answered]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    topics, error = _fetch(broker, connection, body.group_id, body.topics, version >= 7 and body.require_stable)
    if error and version >= 2:
        topics = []
    return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[
        _Topic(name=name, partitions=[
            _Partition(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                       error_code=error if version < 2 else code) for p, o, e, m, code in parts])
        for name, parts in topics])


def _topic_id(broker: BrokerContext, name: str) -> uuid.UUID:
    topic = broker.topics.get(name)
    return ZERO_UUID if topic is None else topic.topic_id
