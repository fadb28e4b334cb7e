"""Online migration between the classic protocol and KIP-848's, as Kafka 4.3.1's GroupMetadataManager does
it, by `group.consumer.migration.policy` (bidirectional, upgrade, downgrade, disabled):

- upgrade: a ConsumerGroupHeartbeat joining (epoch 0) a classic group with members turns it into a
  consumer group keeping its members as classic members: group and member epochs are the classic
  generation, each member's current and target assignment its last SyncGroup assignment, its
  subscription its JoinGroup metadata (Kafka's ConsumerGroup.fromClassicGroup). Refused with
  GROUP_ID_NOT_FOUND (Kafka's messages) when the policy forbids it, the group is not of protocol type
  "consumer", it is over group.consumer.max.size, its metadata is not the consumer protocol, or an
  assignment carries a custom assignor's user data (it would be lost);
- downgrade: when the members that leave or are fenced leave only classic members, the group turns
  classic again (Kafka's ClassicGroup.fromConsumerGroup): generation = the group epoch, Stable, each
  member's assignment its target, then a rebalance. Not when the policy forbids it or the members left
  are more than group.max.size (the group stays a consumer group).
An empty group changes type whatever the policy (consumer_groups.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.group import consumer_protocol as cp
from broker.group.consumer_group import ClassicMeta, ConsumerGroup, ConsumerMember, MemberState
from broker.group.group import CONSUMER_PROTOCOL_TYPE, Group, GroupError, GroupState, Member
from protocol.errors import ErrorCode

UPGRADES = ("bidirectional", "upgrade")
DOWNGRADES = ("bidirectional", "downgrade")


@dataclass(frozen=True)
class Migration:
    policy: str = "bidirectional"  # group.consumer.migration.policy
    classic_max_size: int = 2147483647  # group.max.size

    @property
    def classic_may_join(self) -> bool:
        """Classic members may join a consumer group with members unless migration is disabled."""
        return self.policy != "disabled"


DEFAULT_MIGRATION = Migration()


def _not_upgraded(group_id: str, why: str) -> GroupError:
    return GroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                      f"Cannot upgrade classic group {group_id} to consumer group because {why}.")


def to_consumer_group(classic: Group, migration: Migration, consumer_max_size: int,
                      topics: cp.TopicIds) -> ConsumerGroup:
    """The consumer group a classic group with members becomes (GroupError when it may not)."""
    gid = classic.group_id
    if migration.policy not in UPGRADES:
        raise _not_upgraded(gid, "online upgrade is disabled")
    if not classic.uses_consumer_protocol:
        raise _not_upgraded(gid, "the group does not use the consumer embedded protocol")
    if len(classic.members) > consumer_max_size:
        raise _not_upgraded(gid, "the group size exceeds the consumer group maximum size")
    generation = classic.generation_id
    group = ConsumerGroup(gid, group_epoch=generation, assignment_epoch=generation)
    for m in classic.members.values():
        protocol = classic.protocol_name or m.protocols[0][0]
        try:
            held, user_data = cp.decode_assignment(m.assignment)
            subscription = cp.decode_subscription(m.metadata(protocol))
        except cp.MalformedProtocol as exc:
            raise _not_upgraded(gid, "the embedded consumer protocol is malformed") from exc
        if user_data:
            raise _not_upgraded(gid, "an unsupported custom assignor is in use. Please refer to the documentation "
                                     "or switch to a default assignor before re-attempting the upgrade")
        assigned = cp.by_id(held, topics)
        group.members[m.member_id] = ConsumerMember(
            m.member_id, m.client_id, m.client_host, instance_id=m.group_instance_id, rack_id=subscription.rack_id,
            rebalance_timeout_ms=m.rebalance_timeout_ms, subscribed=list(subscription.topics), epoch=generation,
            previous_epoch=generation, state=MemberState.STABLE, assigned=assigned,
            held_since={(t, p): generation for t, parts in assigned.items() for p in parts},
            classic=ClassicMeta(m.session_timeout_ms, list(m.protocols)))
        group.target[m.member_id] = {t: set(p) for t, p in assigned.items()}
    return group


def may_downgrade(group: ConsumerGroup, leaving: set[str], migration: Migration) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMembers."""
    if not group.classic_only_without(leaving) or migration.policy not in DOWNGRADES:
        return False
    return len(group.members) - len(leaving & set(group.members)) <= migration.classic_max_size


def to_classic_group(group: ConsumerGroup, leaving: set[str], topics: cp.TopicIds) -> Group:
    """The classic group the consumer group's remaining (classic) members make: Stable at the group epoch,
    each member's assignment its target, serialized at its subscription's version."""
    classic = Group(group.group_id, GroupState.STABLE, generation_id=group.group_epoch,
                    protocol_type=CONSUMER_PROTOCOL_TYPE)
    for m in group.members.values():
        if m.member_id in leaving or m.classic is None:
            continue
        classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                           m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols)))
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for member in classic.members.values():
        target = cp.by_name(group.target.get(member.member_id, {}), topics)
        member.assignment = cp.encode_assignment(cp.version_of(member.metadata(classic.protocol_name)), target)
    return classic
