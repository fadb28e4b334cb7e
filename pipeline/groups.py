"""Consumer-group calls the pipeline needs, on the project's client: commit a group's offsets, and see
which groups read a topic and where they are.

A stream reports its progress to a group with a simple commit (generation -1, no member id), the way
an assigned consumer that never joins commits: the group needs no members, and the broker's
`retention.committed.groups` trimming sees the commit like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from io import BytesIO

from client import Admin, BrokerConnection, ErrorCode, TopicPartition
from client.errors import error_for
from protocol.enums import CoordinatorType
from protocol.messages import (
    ConsumerProtocolSubscription,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

_CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
_CommitPartition = _CommitTopic.OffsetCommitRequestPartition
_FetchTopic = OffsetFetchRequest.OffsetFetchRequestTopic


@dataclass
class GroupView:
    """What one group shows about the topics asked for."""

    group_id: str
    state: str
    committed: dict[TopicPartition, int] = field(default_factory=dict)  # partitions without a commit are absent
    subscribed: set[str] = field(default_factory=set)  # topics its live members subscribe to
    members_unknown: bool = False  # live members whose subscriptions the broker does not show (mid-rebalance)


async def _coordinator(admin: Admin, group_id: str) -> BrokerConnection:
    async def attempt() -> BrokerConnection:
        conn = await admin.cluster.any_connection()
        version = conn.pick_version(FindCoordinatorRequest.api_key, high=3)
        reply = await conn.request(FindCoordinatorRequest(key=group_id, key_type=CoordinatorType.GROUP),
                                   version=version)
        if reply.error_code:
            raise error_for(reply.error_code, reply.error_message or f"find the coordinator of {group_id!r}")
        if reply.node_id not in admin.cluster.metadata.brokers:
            await admin.cluster.refresh_metadata([])
        return await admin.cluster.connection(reply.node_id)

    return await admin.cluster.retry(attempt, what=f"FindCoordinator {group_id}")


async def commit_offsets(admin: Admin, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Commit `offsets` (the next offset to read, per partition) to `group_id`; raises KafkaError on a refusal
    (for example UNKNOWN_MEMBER_ID when live consumers use the same group id)."""
    topics: dict[str, list] = {}
    for tp, offset in sorted(offsets.items()):
        topics.setdefault(tp.topic, []).append(_CommitPartition(
            partition_index=tp.partition, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""))

    async def attempt() -> None:
        conn = await _coordinator(admin, group_id)
        version = conn.pick_version(OffsetCommitRequest.api_key, low=2, high=8)
        reply = await conn.request(OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            retention_time_ms=-1, topics=[_CommitTopic(name=t, partitions=ps) for t, ps in topics.items()]),
            version=version)
        for topic in reply.topics:
            for p in topic.partitions:
                if p.error_code:
                    raise error_for(p.error_code, f"commit {topic.name}-{p.partition_index} to group {group_id!r}")

    await admin.cluster.retry(attempt, what=f"OffsetCommit {group_id}")


async def committed_offsets(admin: Admin, group_id: str,
                            partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """The group's committed offset of each partition that has one."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)

    async def attempt() -> dict[TopicPartition, int]:
        conn = await _coordinator(admin, group_id)
        version = conn.pick_version(OffsetFetchRequest.api_key, low=2, high=7)
        reply = await conn.request(OffsetFetchRequest(
            group_id=group_id, topics=[_FetchTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
            require_stable=False), version=version)
        if reply.error_code:
            raise error_for(reply.error_code, f"fetch the offsets of group {group_id!r}")
        out = {}
        for topic in reply.topics:
            for p in topic.partitions:
                if p.error_code:
                    raise error_for(p.error_code, f"fetch {topic.name}-{p.partition_index} of group {group_id!r}")
                if p.committed_offset >= 0:
                    out[TopicPartition(topic.name, p.partition_index)] = p.committed_offset
        return out

    return await admin.cluster.retry(attempt, what=f"OffsetFetch {group_id}")


async def list_groups(admin: Admin) -> dict[str, str]:
    """Every group any broker coordinates: group id -> protocol type."""
    metadata = await admin.cluster.refresh_metadata([])
    groups: dict[str, str] = {}
    for node_id in sorted(metadata.brokers):
        conn = await admin.cluster.connection(node_id)
        reply = await conn.request(ListGroupsRequest(states_filter=[], types_filter=[]),
                                   version=conn.pick_version(ListGroupsRequest.api_key, high=4))
        if reply.error_code:
            raise error_for(reply.error_code, f"list the groups of broker {node_id}")
        groups.update({g.group_id: g.protocol_type for g in reply.groups})
    return groups


async def describe_group(admin: Admin, group_id: str, partitions: Iterable[TopicPartition]) -> GroupView:
    """The group's state, live members' subscriptions and committed offsets of `partitions`."""
    partitions = list(partitions)
    conn = await _coordinator(admin, group_id)
    reply = await conn.request(DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False),
                               version=conn.pick_version(DescribeGroupsRequest.api_key, high=5))
    (described,) = reply.groups
    if described.error_code and described.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
        raise error_for(described.error_code, f"describe group {group_id!r}")
    view = GroupView(group_id, described.group_state)
    if described.protocol_type == "consumer":  # other kinds (Connect workers) do not read topics themselves
        for member in described.members:
            topics = subscription_topics(member.member_metadata)
            if topics is None:
                view.members_unknown = True
            else:
                view.subscribed.update(topics)
    view.committed = await committed_offsets(admin, group_id, partitions) if partitions else {}
    return view


def subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription (an int16 version, then the v0 fields every version
    starts with), or None when there is none to read (the broker sends it only while the group is Stable)."""
    if not metadata or len(metadata) < 2:
        return None
    stream = BytesIO(bytes(metadata)[2:])  # later versions append fields after the topics: read the prefix only
    try:
        return list(ConsumerProtocolSubscription[0].codec.decode_from(stream).topics)
    except Exception:  # bytes we cannot read: the member counts as unknown
        return None
