"""What every consumer group of a cluster has committed, asked of every coordinator over the wire.

In a cluster each broker coordinates only the groups of the `__consumer_offsets` partitions it
leads, so the leader of a trimmed partition (broker/group/trim.py) cannot see the other groups'
commits in memory. It asks, as an admin client would: ListGroups on every alive broker (each lists
the groups it coordinates), then DescribeGroups (members and their subscriptions) and OffsetFetch
(the commits on the trimmed topics) of each coordinator for its groups. A broker that cannot be
asked makes the picture incomplete, and an incomplete picture trims nothing under "*".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import structlog

from broker.group.group import CONSUMER_PROTOCOL_TYPE, parse_subscription
from protocol.errors import ErrorCode
from protocol.messages import DescribeGroupsRequest, ListGroupsRequest, OffsetFetchRequest

if TYPE_CHECKING:
    from client.security import ClientSecurity

log = structlog.get_logger("trim")

LIST_GROUPS_VERSION, DESCRIBE_GROUPS_VERSION, OFFSET_FETCH_VERSION = 4, 5, 8
NOT_READING_STATES = frozenset({"Empty", "Dead"})
_Group = OffsetFetchRequest.OffsetFetchRequestGroup


@dataclass
class ClusterCommits:
    committed: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)  # (topic, p) -> group -> offset
    readers: dict[str, set[str]] = field(default_factory=dict)  # topic -> groups with live members reading it
    live: set[str] = field(default_factory=set)  # groups with live members
    complete: bool = True  # every alive broker answered

    def live_readers(self, topic: str, partition: int) -> set[str]:
        """The groups that matter under "*" besides those with commits: live members that read the topic
        (or committed on the partition), as the local coordinator's min_committed_offset counts them."""
        return self.readers.get(topic, set()) | (set(self.committed.get((topic, partition), {})) & self.live)


class AliveBrokers(Protocol):
    """The cluster's view of the other brokers (broker/cluster/cluster.py)."""

    def alive_ids(self) -> list[int]: ...
    def endpoint(self, broker_id: int) -> tuple[str, int] | None: ...


async def gather(brokers: AliveBrokers, security: ClientSecurity | None,
                 partitions: dict[str, list[int]]) -> ClusterCommits:
    """The commits on `partitions` ({topic: [partition, ...]}) of every group in the cluster, asked over
    the inter-broker listener with its `security`."""
    from client.connection import BrokerConnection  # the project's client, imported when first needed

    result = ClusterCommits()
    for node_id in brokers.alive_ids():
        endpoint = brokers.endpoint(node_id)
        if endpoint is None:
            result.complete = False
            continue
        try:
            async with BrokerConnection(endpoint[0], endpoint[1], node_id=node_id, client_id="ebb-trim",
                                        request_timeout_s=10, connect_timeout_s=5,
                                        security=security) as connection:
                await _ask_coordinator(connection, partitions, result)
        except Exception as exc:  # unreachable, closed, timed out: this round does not know everything
            log.warning("could not ask a coordinator for its groups' commits", broker=node_id, error=repr(exc))
            result.complete = False
    return result


async def _ask_coordinator(connection, partitions: dict[str, list[int]], result: ClusterCommits) -> None:
    listed = await connection.request(ListGroupsRequest(states_filter=[]), version=LIST_GROUPS_VERSION)
    if listed.error_code != ErrorCode.NONE:
        raise RuntimeError(f"ListGroups: {ErrorCode(listed.error_code).name}")
    group_ids = [g.group_id for g in listed.groups]
    if not group_ids:
        return
    described = await connection.request(DescribeGroupsRequest(groups=group_ids, include_authorized_operations=False),
                                         version=DESCRIBE_GROUPS_VERSION)
    for group in described.groups:
        if group.error_code != ErrorCode.NONE or group.group_state in NOT_READING_STATES or not group.members:
            continue
        result.live.add(group.group_id)
        for topic in partitions:
            if _reads(group, topic):
                result.readers.setdefault(topic, set()).add(group.group_id)
    topics = [_Group.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in partitions.items()]
    fetched = await connection.request(OffsetFetchRequest(
        groups=[_Group(group_id=g, topics=topics) for g in group_ids], require_stable=False),
        version=OFFSET_FETCH_VERSION)
    for group in fetched.groups:
        if group.error_code != ErrorCode.NONE:
            raise RuntimeError(f"OffsetFetch {group.group_id}: {ErrorCode(group.error_code).name}")
        for topic in group.topics:
            for p in topic.partitions:
                if p.error_code == ErrorCode.NONE and p.committed_offset >= 0:
                    result.committed.setdefault((topic.name, p.partition_index), {})[group.group_id] = \
                        p.committed_offset


def _reads(group, topic: str) -> bool:
    """A member subscribed to the topic; a group of another protocol is assumed to read everything."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return True
    for member in group.members:
        topics = parse_subscription(member.member_metadata)
        if topics is None or topic in topics:
            return True
    return False
