"""The KIP-848 consumer group records of `__consumer_offsets`, as Kafka 4.3.1 writes them.

    key   = int16 record type | its key v0          value = int16 version 0 | its value v0, or null (tombstone)
    3  ConsumerGroupMetadata            the group epoch
    5  ConsumerGroupMemberMetadata      one member's subscription, client, rack, instance id
    6  ConsumerGroupTargetAssignmentMetadata   the target assignment's epoch and when it was computed
                                            (tagged AssignmentTimestamp: a restart keeps the interval)
    7  ConsumerGroupTargetAssignmentMember     one member's target partitions
    8  ConsumerGroupCurrentMemberAssignment    one member's epochs, state, held and to-revoke partitions

Kafka 4.x no longer writes type 4 (PartitionMetadata: the topics are summed up in type 3's MetadataHash)
and writes 16 (RegularExpression) for each resolved regex; Ebb resolves regexes again at load, so it
writes neither, and skips both when replaying a log a Kafka broker wrote. Type 3's MetadataHash is
Ebb's own hash of the subscribed topics (Kafka's function is not reproduced): a load that finds the
topics changed bumps the group epoch at the next heartbeat, and a Kafka coordinator reading Ebb's
log recomputes its groups' targets once. The specs are schemas/ConsumerGroup*Key.json and *Value.json.

A group's records are made, kept, written and read back by record_log.py (GroupKind, GroupRecordLog);
KIND below gives what is this kind's own: its record types and classes, and the fields only it has.
"""

from __future__ import annotations

from broker.group.consumer_group import GROUP_TYPE, ClassicMeta, ConsumerGroup, ConsumerMember, HeldSince, MemberState
from broker.group.member_group import Assignment
from broker.group.record_log import GroupKind, assignment_of
from protocol.messages import (
    ApiMessage,
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
_KEYS: dict[int, type[ApiMessage]] = {
    GROUP_METADATA: ConsumerGroupMetadataKey,
    MEMBER_METADATA: ConsumerGroupMemberMetadataKey,
    TARGET_METADATA: ConsumerGroupTargetAssignmentMetadataKey,
    TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberKey,
    CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentKey,
}
# Kafka's MemberState values (the int8 of record 8).
_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {code: state for state, code in _STATE_CODES.items()}

_Classic = ConsumerGroupMemberMetadataValue.ClassicMemberMetadata


class _ConsumerKind(GroupKind[ConsumerGroup, ConsumerMember]):  # the fields only consumer groups' records hold
    def target_metadata_of(self, group: ConsumerGroup) -> ConsumerGroupTargetAssignmentMetadataValue:
        return ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=group.assignment_epoch,
                                                          assignment_timestamp=group.assignment_ms)

    def member_metadata_of(self, m: ConsumerMember) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed), subscribed_topic_regex=m.regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            classic_member_metadata=None if m.classic is None else _Classic(
                session_timeout_ms=m.classic.session_timeout_ms, supported_protocols=[
                    _Classic.ClassicProtocol(name=n, metadata=md) for n, md in m.classic.protocols]))

    def current_assignment_of(self, m: ConsumerMember) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=m.epoch, previous_member_epoch=m.previous_epoch, state=_STATE_CODES[m.state],
            assigned_partitions=_held_with_epochs(m, m.assigned),
            partitions_pending_revocation=_held_with_epochs(m, m.pending_revocation))

    def read_target_metadata(self, group: ConsumerGroup, body: memoryview) -> None:
        target = ConsumerGroupTargetAssignmentMetadataValue[0].decode(body)
        group.assignment_epoch, group.assignment_ms = target.assignment_epoch, target.assignment_timestamp

    def read_member_metadata(self, member: ConsumerMember, body: memoryview) -> None:
        meta = ConsumerGroupMemberMetadataValue[0].decode(body)
        member.instance_id, member.rack_id = meta.instance_id, meta.rack_id
        member.client_id, member.client_host = meta.client_id, meta.client_host
        member.subscribed, member.regex = list(meta.subscribed_topic_names), meta.subscribed_topic_regex
        member.rebalance_timeout_ms, member.server_assignor = meta.rebalance_timeout_ms, meta.server_assignor
        if (classic := meta.classic_member_metadata) is not None:
            member.classic = ClassicMeta(classic.session_timeout_ms, [
                (p.name, bytes(p.metadata)) for p in classic.supported_protocols])

    def read_current_assignment(self, member: ConsumerMember, body: memoryview) -> None:
        current = ConsumerGroupCurrentMemberAssignmentValue[0].decode(body)
        member.epoch, member.previous_epoch = current.member_epoch, current.previous_member_epoch
        member.state = _STATES.get(current.state, MemberState.STABLE)
        member.assigned = assignment_of(current.assigned_partitions)
        member.pending_revocation = assignment_of(current.partitions_pending_revocation)
        member.held_since = _held_since(
            [*current.assigned_partitions, *current.partitions_pending_revocation], current.member_epoch)


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
    count that does not match its partitions) counts from the member epoch (at least 0), as Kafka reads it."""
    found: HeldSince = {}
    for t in topics:
        epochs = t.assignment_epochs
        if epochs is None or len(epochs) != len(t.partitions):
            epochs = [max(member_epoch, 0)] * len(t.partitions)  # a static member gone for now is at -2
        found.update(((t.topic_id, p), e) for p, e in zip(t.partitions, epochs, strict=True))
    return found


KIND = _ConsumerKind(
    name=GROUP_TYPE, keys=_KEYS, group_metadata=GROUP_METADATA, member_metadata=MEMBER_METADATA,
    target_metadata=TARGET_METADATA, target_member=TARGET_MEMBER, current_assignment=CURRENT_ASSIGNMENT,
    metadata_value=ConsumerGroupMetadataValue, target_member_value=ConsumerGroupTargetAssignmentMemberValue,
    new_group=ConsumerGroup, new_member=lambda member_id: ConsumerMember(member_id, "", ""))
