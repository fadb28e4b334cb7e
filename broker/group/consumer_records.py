"""The KIP-848 consumer group records of `__consumer_offsets`, as Kafka 4.3.1 writes them.

    key   = int16 record type | its key v0          value = int16 version 0 | its value v0, or null (tombstone)
    3  ConsumerGroupMetadata            the group epoch
    5  ConsumerGroupMemberMetadata      one member's subscription, client, rack, instance id
    6  ConsumerGroupTargetAssignmentMetadata   the target assignment's epoch
    7  ConsumerGroupTargetAssignmentMember     one member's target partitions
    8  ConsumerGroupCurrentMemberAssignment    one member's epochs, state, held and to-revoke partitions

Kafka 4.x no longer writes type 4 (PartitionMetadata: the topics are summed up in type 3's MetadataHash)
and writes 16 (RegularExpression) for each resolved regex; Ebb resolves regexes again at load, so it
writes neither, and skips both when replaying a log a Kafka broker wrote. Type 3's MetadataHash is
Ebb's own hash of the subscribed topics (Kafka's function is not reproduced): a load that finds the
topics changed bumps the group epoch at the next heartbeat, and a Kafka coordinator reading Ebb's
log recomputes its groups' targets once. The specs are schemas/ConsumerGroup*Key.json and *Value.json.

A group's records are kept and written by record_log.py's GroupRecordLog.
"""

from __future__ import annotations

import hashlib
import uuid

from broker.group.consumer_group import (
    Assignment,
    ClassicMeta,
    ConsumerGroup,
    ConsumerMember,
    HeldSince,
    MemberState,
)
from broker.group.record_log import (
    Records,
    assignment_of,
    key_bytes,
    record_type,
    topic_partitions,
    value_body,
    value_bytes,
)
from protocol.messages import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION = 6, 7, 8, 16
WRITTEN_TYPES = (GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
KNOWN_TYPES = (*WRITTEN_TYPES, PARTITION_METADATA, REGULAR_EXPRESSION)
_KEYS = {GROUP_METADATA: ConsumerGroupMetadataKey, MEMBER_METADATA: ConsumerGroupMemberMetadataKey,
         TARGET_METADATA: ConsumerGroupTargetAssignmentMetadataKey,
         TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberKey,
         CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentKey}
# Kafka's MemberState values (the int8 of record 8).
_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {code: state for state, code in _STATE_CODES.items()}

_Classic = ConsumerGroupMemberMetadataValue.ClassicMemberMetadata


def _key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    return key_bytes(kind, _KEYS[kind], group_id, member_id)


def group_records(group: ConsumerGroup, only: str | None = None) -> Records:
    """Every record that describes the group now; with `only`, the group's own and that member's."""
    gid = group.group_id
    members = group.members if only is None else {only: group.members[only]} if only in group.members else {}
    targets = group.target if only is None else {only: group.target[only]} if only in group.target else {}
    found: Records = {
        _key(GROUP_METADATA, gid): value_bytes(ConsumerGroupMetadataValue,
                                          ConsumerGroupMetadataValue(epoch=group.group_epoch,
                                                                     metadata_hash=topics_hash(group.topics))),
        _key(TARGET_METADATA, gid): value_bytes(ConsumerGroupTargetAssignmentMetadataValue,
                                           ConsumerGroupTargetAssignmentMetadataValue(
                                               assignment_epoch=group.assignment_epoch)),
    }
    for member_id, target in targets.items():
        found[_key(TARGET_MEMBER, gid, member_id)] = value_bytes(
            ConsumerGroupTargetAssignmentMemberValue, ConsumerGroupTargetAssignmentMemberValue(
                topic_partitions=topic_partitions(target, ConsumerGroupTargetAssignmentMemberValue.TopicPartition)))
    for member_id, m in members.items():
        found[_key(MEMBER_METADATA, gid, member_id)] = value_bytes(
            ConsumerGroupMemberMetadataValue, ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed), subscribed_topic_regex=m.regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            classic_member_metadata=None if m.classic is None else _Classic(
                session_timeout_ms=m.classic.session_timeout_ms, supported_protocols=[
                    _Classic.ClassicProtocol(name=n, metadata=md) for n, md in m.classic.protocols])))
        found[_key(CURRENT_ASSIGNMENT, gid, member_id)] = value_bytes(
            ConsumerGroupCurrentMemberAssignmentValue, ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=m.epoch, previous_member_epoch=m.previous_epoch, state=_STATE_CODES[m.state],
                assigned_partitions=_held_with_epochs(m, m.assigned),
                partitions_pending_revocation=_held_with_epochs(m, m.pending_revocation)))
    return found


_Held = ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions


def _held_with_epochs(member: ConsumerMember, assignment: Assignment) -> list:
    """Record 8's partitions with the epoch each was given at (AssignmentEpochs, written as Kafka 4.3.1
    writes them: a commit at an older epoch is judged by them, KIP-1251)."""
    found = []
    for topic_id, parts in sorted(assignment.items()):
        if parts:
            ordered = sorted(parts)
            found.append(_Held(topic_id=topic_id, partitions=ordered, assignment_epochs=[
                member.held_since.get((topic_id, p), member.epoch) for p in ordered]))
    return found


def _held_since(topics, member_epoch: int) -> HeldSince:
    """The assignment epochs record 8 carries; a topic without them (a log of Kafka before 4.3, or a
    count that does not match its partitions) counts from the member epoch, as Kafka reads it."""
    found: HeldSince = {}
    for t in topics:
        epochs = t.assignment_epochs
        if epochs is None or len(epochs) != len(t.partitions):
            epochs = [member_epoch] * len(t.partitions)
        found.update(((t.topic_id, p), e) for p, e in zip(t.partitions, epochs, strict=True))
    return found


def topics_hash(topics: dict[str, tuple[uuid.UUID, int]]) -> int:
    """Ebb's hash of a group's subscribed topics (names, ids, partition counts), as a signed int64: a load
    that finds another hash sees the topics changed while the coordinator was away. Not Kafka's function."""
    if not topics:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name, (topic_id, partitions) in sorted(topics.items()):
        digest.update(f"{name}\0{topic_id}\0{partitions}\0".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)


# The order Kafka's coordinator writes them in: a member's tombstones (current assignment, target,
# subscription), then the subscription, group epoch, targets, target epoch and current assignments,
# then the group's own tombstones.
WRITE_ORDER = {MEMBER_METADATA: 0, GROUP_METADATA: 1, TARGET_MEMBER: 2, TARGET_METADATA: 3, CURRENT_ASSIGNMENT: 4}
TOMBSTONE_ORDER = {CURRENT_ASSIGNMENT: -3, TARGET_MEMBER: -2, MEMBER_METADATA: -1, TARGET_METADATA: 5,
                   GROUP_METADATA: 6}


def group_id_of(key: bytes) -> str:
    kind = record_type(key)
    return _KEYS[kind][0].decode(memoryview(key)[2:]).group_id


def group_from_records(group_id: str, found: Records) -> tuple[ConsumerGroup, int] | None:
    """The group its records describe (its topics left to the caller) and its topics' hash; None without
    its group epoch record (tombstoned or never written)."""
    group = ConsumerGroup(group_id)
    metadata_hash = 0
    members: dict[str, ConsumerMember] = {}
    seen_epoch = False
    for key, raw in found.items():
        kind = record_type(key)
        body = value_body(kind, raw)
        if kind == GROUP_METADATA:
            metadata = ConsumerGroupMetadataValue[0].decode(body)
            group.group_epoch, metadata_hash, seen_epoch = metadata.epoch, metadata.metadata_hash, True
        elif kind == TARGET_METADATA:
            group.assignment_epoch = ConsumerGroupTargetAssignmentMetadataValue[0].decode(body).assignment_epoch
        elif kind == TARGET_MEMBER:
            member_id = ConsumerGroupTargetAssignmentMemberKey[0].decode(memoryview(key)[2:]).member_id
            value = ConsumerGroupTargetAssignmentMemberValue[0].decode(body)
            group.target[member_id] = assignment_of(value.topic_partitions)
        elif kind in (MEMBER_METADATA, CURRENT_ASSIGNMENT):
            member_id = _KEYS[kind][0].decode(memoryview(key)[2:]).member_id
            member = members.setdefault(member_id, ConsumerMember(member_id, "", ""))
            if kind == MEMBER_METADATA:
                meta = ConsumerGroupMemberMetadataValue[0].decode(body)
                member.instance_id, member.rack_id = meta.instance_id, meta.rack_id
                member.client_id, member.client_host = meta.client_id, meta.client_host
                member.subscribed, member.regex = list(meta.subscribed_topic_names), meta.subscribed_topic_regex
                member.rebalance_timeout_ms, member.server_assignor = meta.rebalance_timeout_ms, meta.server_assignor
                if (classic := meta.classic_member_metadata) is not None:
                    member.classic = ClassicMeta(classic.session_timeout_ms, [
                        (p.name, bytes(p.metadata)) for p in classic.supported_protocols])
            else:
                current = ConsumerGroupCurrentMemberAssignmentValue[0].decode(body)
                member.epoch, member.previous_epoch = current.member_epoch, current.previous_member_epoch
                member.state = _STATES.get(current.state, MemberState.STABLE)
                member.assigned = assignment_of(current.assigned_partitions)
                member.pending_revocation = assignment_of(current.partitions_pending_revocation)
                member.held_since = _held_since(
                    [*current.assigned_partitions, *current.partitions_pending_revocation], current.member_epoch)
    if not seen_epoch:
        return None
    group.members = members
    return group, metadata_hash

