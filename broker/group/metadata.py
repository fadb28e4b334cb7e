"""A group as its GroupMetadata record in __consumer_offsets says it, and back: written when a group
becomes Empty, when the leader's assignment arrives and when a static member is replaced; replayed at
load, when the group comes back as it was last written (Stable if it had members)."""

from __future__ import annotations

from broker.group.group import Group, GroupState, Member
from protocol.messages import GroupMetadataValue

_Member = GroupMetadataValue.MemberMetadata


def group_value(group: Group, assignment: dict[str, bytes] | None = None) -> GroupMetadataValue:
    """The record for the group now; `assignment` (by member id) replaces the members' current ones."""
    members = [
        _Member(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms, subscription=m.metadata(group.protocol_name),
                assignment=(assignment or {}).get(m.member_id, m.assignment))
        for m in group.members.values()]
    return GroupMetadataValue(protocol_type=group.protocol_type or "", generation=group.generation_id,
                              protocol=group.protocol_name, leader=group.leader_id,
                              current_state_timestamp=group.state_timestamp_ms or -1, members=members)


def group_from_value(group_id: str, value: GroupMetadataValue) -> Group:
    """The group a replayed record describes; its members have no session timers yet."""
    protocol_type = value.protocol_type or None
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    group = Group(group_id, state, generation_id=value.generation, protocol_type=protocol_type,
                  protocol_name=value.protocol, leader_id=value.leader)
    group.state_timestamp_ms = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
    for m in value.members:
        rebalance = m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout
        group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, rebalance,
                         m.session_timeout, value.protocol_type, [(value.protocol or "", bytes(m.subscription))],
                         bytes(m.assignment)))
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
