"""The share group (KIP-932) records of `__consumer_offsets`, as Kafka 4.3.1 writes them.

    key   = int16 record type | its key v0          value = int16 version 0 | its value v0, or null (tombstone)
    10 ShareGroupMemberMetadata            one member's subscription, client, rack
    11 ShareGroupMetadata                  the group epoch and its topics' hash
    12 ShareGroupTargetAssignmentMetadata  the target assignment's epoch
    13 ShareGroupTargetAssignmentMember    one member's target partitions
    14 ShareGroupCurrentMemberAssignment   one member's epochs and partitions (state always 0: stable)
    15 ShareGroupStatePartitionMetadata    which share-partitions have state (initializing, initialized, deleting)

Type 15 is written once a subscribed share-partition's state is asked to be initialized (share_groups.py),
and again when that is answered, around a deletion of states (DeleteShareGroupOffsets, DeleteGroups: its
deleting list) and when a topic it names is deleted; its tombstone goes with the group's (after the
target epoch's, before the group epoch's, as Kafka orders them). Type 11's MetadataHash is Ebb's hash of
the subscribed topics (record_log.topics_hash), as for consumer groups. The specs are
schemas/ShareGroup*Key.json and *Value.json. The records are made, kept, written and read back by
record_log.py; KIND below gives what is this kind's own.
"""

from __future__ import annotations

import time

from broker.group.record_log import GroupKind, Records, assignment_of, topic_partitions, value_bytes
from broker.group.share_group import GROUP_TYPE, ShareGroup, ShareMember, StatePartitions
from protocol.messages import (
    ApiMessage,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)

MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 10, 11, 12, 13, 14
STATE_PARTITION_METADATA = 15
OWN_TYPES = (STATE_PARTITION_METADATA,)  # beside the five both kinds write (record_log.GroupKind.own_records)
WRITTEN_TYPES = (MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, *OWN_TYPES)
KNOWN_TYPES = WRITTEN_TYPES
_KEYS: dict[int, type[ApiMessage]] = {
    GROUP_METADATA: ShareGroupMetadataKey,
    MEMBER_METADATA: ShareGroupMemberMetadataKey,
    TARGET_METADATA: ShareGroupTargetAssignmentMetadataKey,
    TARGET_MEMBER: ShareGroupTargetAssignmentMemberKey,
    CURRENT_ASSIGNMENT: ShareGroupCurrentMemberAssignmentKey,
    STATE_PARTITION_METADATA: ShareGroupStatePartitionMetadataKey,
}
STABLE = 0  # Kafka's MemberState.STABLE: a share member has no other state


class _ShareKind(GroupKind[ShareGroup, ShareMember]):  # the fields only share groups' records hold
    def target_metadata_of(self, group: ShareGroup) -> ShareGroupTargetAssignmentMetadataValue:
        return ShareGroupTargetAssignmentMetadataValue(assignment_epoch=group.assignment_epoch,
                                                       assignment_timestamp=group.assignment_ms)

    def member_metadata_of(self, m: ShareMember) -> ShareGroupMemberMetadataValue:
        return ShareGroupMemberMetadataValue(rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                                             subscribed_topic_names=list(m.subscribed))

    def current_assignment_of(self, m: ShareMember) -> ShareGroupCurrentMemberAssignmentValue:
        return ShareGroupCurrentMemberAssignmentValue(
            member_epoch=m.epoch, previous_member_epoch=m.previous_epoch, state=STABLE,
            assigned_partitions=topic_partitions(m.assignment, ShareGroupCurrentMemberAssignmentValue.TopicPartitions))

    def read_target_metadata(self, group: ShareGroup, body: memoryview) -> None:
        target = ShareGroupTargetAssignmentMetadataValue[0].decode(body)
        group.assignment_epoch, group.assignment_ms = target.assignment_epoch, target.assignment_timestamp

    def read_member_metadata(self, member: ShareMember, body: memoryview) -> None:
        meta = ShareGroupMemberMetadataValue[0].decode(body)
        member.rack_id, member.client_id, member.client_host = meta.rack_id, meta.client_id, meta.client_host
        member.subscribed = list(meta.subscribed_topic_names)

    def read_current_assignment(self, member: ShareMember, body: memoryview) -> None:
        current = ShareGroupCurrentMemberAssignmentValue[0].decode(body)
        member.epoch, member.previous_epoch = current.member_epoch, current.previous_member_epoch
        member.assignment = assignment_of(current.assigned_partitions)

    def own_records(self, group: ShareGroup) -> Records:
        state = group.state_partitions
        if state is None:
            return {}
        value = ShareGroupStatePartitionMetadataValue
        info = value.TopicPartitionsInfo
        return {self.key(STATE_PARTITION_METADATA, group.group_id): value_bytes(value(
            initializing_topics=[info(topic_id=t, topic_name=name, partitions=sorted(parts))
                                 for t, (name, parts, _) in sorted(state.initializing.items())],
            initialized_topics=[info(topic_id=t, topic_name=name, partitions=sorted(parts))
                                for t, (name, parts) in sorted(state.initialized.items())],
            deleting_topics=[value.TopicInfo(topic_id=t, topic_name=name)
                             for t, name in sorted(state.deleting.items())]))}

    def read_own(self, group: ShareGroup, record_type: int, body: memoryview) -> None:
        if record_type != STATE_PARTITION_METADATA:
            return
        found = ShareGroupStatePartitionMetadataValue[0].decode(body)
        now_ms = time.time_ns() // 1_000_000  # an ask read back counts from the load, as Kafka's replay
        group.state_partitions = StatePartitions(
            initialized={t.topic_id: (t.topic_name, frozenset(t.partitions)) for t in found.initialized_topics},
            initializing={t.topic_id: (t.topic_name, frozenset(t.partitions), now_ms)
                          for t in found.initializing_topics},
            deleting={t.topic_id: t.topic_name for t in found.deleting_topics})


KIND = _ShareKind(
    name=GROUP_TYPE, keys=_KEYS, group_metadata=GROUP_METADATA, member_metadata=MEMBER_METADATA,
    target_metadata=TARGET_METADATA, target_member=TARGET_MEMBER, current_assignment=CURRENT_ASSIGNMENT,
    metadata_value=ShareGroupMetadataValue, target_member_value=ShareGroupTargetAssignmentMemberValue,
    new_group=ShareGroup, new_member=lambda member_id: ShareMember(member_id, "", ""))
KIND.write_order[STATE_PARTITION_METADATA] = 5  # after the current assignments, as Kafka's heartbeat adds it
KIND.tombstone_order[STATE_PARTITION_METADATA] = 6  # between the target epoch's tombstone and the group epoch's
