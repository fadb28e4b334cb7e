"""Group requests on our codec, for the group tests against a real broker process.

    with WireClient(broker.port) as c:
        member = join(c, "g", version=7)          # both JoinGroup rounds (MEMBER_ID_REQUIRED first)
        sync(c, "g", member, assignment=b"...")   # the leader's SyncGroup
        commit(c, "g", {("t", 0): 5}, member=member)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.messages import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ShareGroupHeartbeatRequest,
    SyncGroupRequest,
)
from tests.support.polling import wait_for

_Protocol = JoinGroupRequest.JoinGroupRequestProtocol
_Assignment = SyncGroupRequest.SyncGroupRequestAssignment
_CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
_CommitPartition = _CommitTopic.OffsetCommitRequestPartition


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 as consumers send it (int16 version first)."""
    value = ConsumerProtocolSubscription(topics=list(topics))
    return struct.pack(">h", 0) + ConsumerProtocolSubscription[0].encode(value)


def assignment(partitions: dict[str, list[int]]) -> bytes:
    TP = ConsumerProtocolAssignment.TopicPartition
    value = ConsumerProtocolAssignment(assigned_partitions=[TP(topic=t, partitions=p) for t, p in partitions.items()])
    return struct.pack(">h", 0) + ConsumerProtocolAssignment[0].encode(value)


@dataclass
class Member:
    group_id: str
    member_id: str
    generation_id: int
    leader: str
    members: list
    protocol_name: str | None
    instance_id: str | None = None

    @property
    def is_leader(self) -> bool:
        return self.leader == self.member_id


def join_request(group_id: str, member_id: str = "", *, session_ms: int = 10_000, rebalance_ms: int = 10_000,
                 instance_id: str | None = None, protocol_type: str = "consumer",
                 protocols: list[tuple[str, bytes]] | None = None, topics: tuple[str, ...] = ("t",)):
    protocols = protocols if protocols is not None else [("range", subscription(*topics))]
    return JoinGroupRequest(group_id=group_id, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                            member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
                            protocols=[_Protocol(name=n, metadata=m) for n, m in protocols], reason=None)


def join_once(client, group_id: str, member_id: str = "", *, version: int = 7, **kwargs):
    return client.send(join_request(group_id, member_id, **kwargs), version)


def join(client, group_id: str, member_id: str = "", *, version: int = 7, **kwargs) -> Member:
    """JoinGroup until admitted (answering MEMBER_ID_REQUIRED); asserts success."""
    reply = join_once(client, group_id, member_id, version=version, **kwargs)
    if reply.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        reply = join_once(client, group_id, reply.member_id, version=version, **kwargs)
    assert reply.error_code == ErrorCode.NONE, ErrorCode(reply.error_code).name
    return Member(group_id, reply.member_id, reply.generation_id, reply.leader, list(reply.members),
                  reply.protocol_name, kwargs.get("instance_id"))


def send_join(client, group_id: str, member_id: str = "", *, version: int = 7, **kwargs) -> int:
    """JoinGroup without waiting for the answer (it is held during a rebalance); `client.receive` reads it."""
    return client.submit(join_request(group_id, member_id, **kwargs), version)


def sync(client, member: Member, assignments: dict[str, bytes] | None = None, *, version: int = 5,
         generation_id: int | None = None, protocol_name: str | None = "range"):
    assignments = assignments if assignments is not None else {}
    return client.send(SyncGroupRequest(
        group_id=member.group_id, generation_id=member.generation_id if generation_id is None else generation_id,
        member_id=member.member_id, group_instance_id=member.instance_id,
        protocol_type="consumer" if version >= 5 else None, protocol_name=protocol_name if version >= 5 else None,
        assignments=[_Assignment(member_id=m, assignment=a) for m, a in assignments.items()]), version)


def heartbeat(client, member: Member, *, version: int = 4, generation_id: int | None = None,
              member_id: str | None = None) -> int:
    return client.send(HeartbeatRequest(
        group_id=member.group_id, generation_id=member.generation_id if generation_id is None else generation_id,
        member_id=member.member_id if member_id is None else member_id,
        group_instance_id=member.instance_id), version).error_code


def leave(client, group_id: str, *members: tuple[str, str | None], version: int = 5):
    if version >= 3:
        body = LeaveGroupRequest(group_id=group_id, members=[
            LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i) for m, i in members])
    else:
        body = LeaveGroupRequest(group_id=group_id, member_id=members[0][0])
    return client.send(body, version)


def commit(client, group_id: str, offsets: dict[tuple[str, int], int], *, member: Member | None = None,
           version: int = 8, generation_id: int | None = None, member_id: str | None = None,
           metadata: str | None = "", retention_ms: int = -1, leader_epoch: int = -1):
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(_CommitPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=leader_epoch,
            committed_metadata=metadata))
    generation = generation_id if generation_id is not None else (member.generation_id if member else -1)
    reply = client.send(OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=generation,
        member_id=member_id if member_id is not None else (member.member_id if member else ""),
        group_instance_id=member.instance_id if member else None, retention_time_ms=retention_ms,
        topics=[_CommitTopic(name=t, partitions=p) for t, p in topics.items()]), version)
    return {(t.name, p.partition_index): p.error_code for t in reply.topics for p in t.partitions}


def fetch(client, group_id: str, topics: dict[str, list[int]] | None, *, version: int = 8,
          require_stable: bool = False) -> tuple[int, dict[tuple[str, int], tuple[int, int, str | None, int]]]:
    """(group error, {(topic, partition): (offset, leader epoch, metadata, error)}) in either layout."""
    if version >= 8:
        asked = None if topics is None else [OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
            name=t, partition_indexes=p) for t, p in topics.items()]
        reply = client.send(OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group_id, topics=asked)], require_stable=require_stable), version)
        (group,) = reply.groups
        assert group.group_id == group_id
        error, answered = group.error_code, group.topics
    else:
        asked = None if topics is None else [OffsetFetchRequest.OffsetFetchRequestTopic(
            name=t, partition_indexes=p) for t, p in topics.items()]
        reply = client.send(OffsetFetchRequest(group_id=group_id, topics=asked, require_stable=require_stable),
                            version)
        error, answered = (reply.error_code if version >= 2 else 0), reply.topics
    return error, {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata,
                                                 p.error_code) for t in answered for p in t.partitions}


def find_coordinator(client, key: str, *, version: int = 3, key_type: int = 0):
    if version >= 4:
        return client.send(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), version).coordinators[0]
    return client.send(FindCoordinatorRequest(key=key, key_type=key_type), version)


def list_groups(client, *, version: int = 5, states: list[str] = (), types: list[str] = ()):
    return client.send(ListGroupsRequest(states_filter=list(states), types_filter=list(types)), version)


def describe(client, *group_ids: str, version: int = 5, include_operations: bool = False):
    body = DescribeGroupsRequest(groups=list(group_ids), include_authorized_operations=include_operations)
    return client.send(body, version).groups


def delete_groups(client, *group_ids: str, version: int = 2) -> dict[str, int]:
    reply = client.send(DeleteGroupsRequest(groups_names=list(group_ids)), version)
    return {r.group_id: r.error_code for r in reply.results}


def delete_offsets(client, group_id: str, partitions: dict[str, list[int]]):
    T = OffsetDeleteRequest.OffsetDeleteRequestTopic
    reply = client.send(OffsetDeleteRequest(group_id=group_id, topics=[
        T(name=t, partitions=[T.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
        for t, ps in partitions.items()]), 0)
    return reply.error_code, {(t.name, p.partition_index): p.error_code for t in reply.topics for p in t.partitions}


def share_settled(c, group: str, member: str, epoch: int):
    """The answer to `member`'s share heartbeats at `epoch` once its group epoch moved (or an error): after
    an initialization a heartbeat asked for finished, the next heartbeat moves the epoch to assign the
    initialized partitions. The asking heartbeat is answered before the share coordinators answer (as
    Kafka's), so a member finds them at a later heartbeat."""
    def moved():
        answer = c.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch), 1)
        return answer if answer.error_code != ErrorCode.NONE or answer.member_epoch != epoch else None
    return wait_for(moved, what=f"{group}'s initialization")
