"""The assignment interval of KIP-848 consumer groups (KIP-1263, `consumer.assignment.interval.ms`), without a
broker: the group epoch moves at once, a new target waits until the interval since the last computation has
passed (member_group.target_due, Kafka's canComputeNextTargetAssignment), and meanwhile the members reconcile
towards the target they have, of which each gets only the topics it still subscribes to."""

from __future__ import annotations

import asyncio
import uuid

from broker.group.consumer_group import MemberState
from broker.group.consumer_groups import ConsumerGroups, ConsumerHeartbeat
from broker.group.consumer_type_changes import ClassicIds
from broker.group.member_group import MemberGroup, target_due
from broker.group_configs import MemberTimeouts

A, B = uuid.UUID(int=1), uuid.UUID(int=2)
PACED = MemberTimeouts(45000, 5000, 1000)


class Clock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


async def _append(group_id, entries) -> int:  # no log: these tests look at the groups in memory
    return 0


def _groups(topics, clock: Clock) -> ConsumerGroups:
    """`topics`: every topic now (name -> (id, partitions)), or what returns it (a new dict once one changed)."""
    return ConsumerGroups(100, ["uniform", "range"], topics if callable(topics) else lambda: topics,
                          ClassicIds(lambda g: False, lambda g: False, lambda g: None), is_share=lambda g: False,
                          append=_append, spawn=lambda coro: asyncio.get_running_loop().create_task(coro),
                          clock=clock)


def _hb(member: str, epoch: int, owned=None, **kw) -> ConsumerHeartbeat:
    fields = dict(group_id="g", member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                  rebalance_timeout_ms=30000 if epoch == 0 else -1, subscribed=["a"] if epoch == 0 else None,
                  regex=None, server_assignor="range" if epoch == 0 else None, owned={} if epoch == 0 else owned,
                  client_id="c", client_host="/h")
    fields.update(kw)
    return ConsumerHeartbeat(**fields)


def test_target_due_as_kafka_judges_it():
    group = MemberGroup("g")
    assert target_due(group, 1000, 5)  # never computed: at once
    group.assignment_ms = 10_000
    assert not target_due(group, 1000, 10_999)
    assert target_due(group, 1000, 11_000)
    assert target_due(group, 0, 10_000)  # an interval of 0: at once
    assert not target_due(group, 15_000, 20_000)


def test_the_group_epoch_moves_at_once_and_the_target_after_the_interval():
    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 4)}, clock)
        first = groups.heartbeat(_hb("m1", 0), PACED)
        assert (first.member_epoch, first.assignment) == (2, {A: {0, 1, 2, 3}})  # the first target: at once
        group = groups.groups["g"]
        assert group.assignment_ms == 1_000_000
        clock.now_ms += 500
        joined = groups.heartbeat(_hb("m2", 0), PACED)
        # The group epoch moved; the target did not: m2 reconciles to the target it has (nothing for it).
        assert (group.group_epoch, group.assignment_epoch) == (3, 2)
        assert (joined.member_epoch, joined.assignment) == (2, {})
        assert group.state.value == "Assigning"
        clock.now_ms += 499
        held = groups.heartbeat(_hb("m1", 2, owned={A: {0, 1, 2, 3}}), PACED)
        assert (held.member_epoch, held.assignment, group.assignment_epoch) == (2, None, 2)
        clock.now_ms += 1  # the interval has passed: this heartbeat computes the target of epoch 3
        revoking = groups.heartbeat(_hb("m1", 2, owned={A: {0, 1, 2, 3}}), PACED)
        assert (group.assignment_epoch, group.assignment_ms) == (3, 1_001_000)
        assert (revoking.member_epoch, revoking.assignment) == (2, {A: {0, 1}})
        assert groups.groups["g"].members["m1"].state == MemberState.UNREVOKED_PARTITIONS
        done = groups.heartbeat(_hb("m1", 2, owned={A: {0, 1}}), PACED)
        assert done.member_epoch == 3
        taken = groups.heartbeat(_hb("m2", 2, owned={}), PACED)
        assert (taken.member_epoch, taken.assignment) == (3, {A: {2, 3}})
        assert group.state.value == "Stable"
        groups.stop()
    asyncio.run(run())


def test_the_interval_read_at_each_heartbeat_lets_a_waiting_target_go_at_once():
    """The interval in force is the heartbeat's (a group config or the broker's, changed meanwhile): set to 0,
    the target waiting since the last join is computed at the next heartbeat."""
    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 2)}, clock)
        groups.heartbeat(_hb("m1", 0), MemberTimeouts(45000, 5000, 15_000))
        clock.now_ms += 10
        assert groups.heartbeat(_hb("m2", 0), MemberTimeouts(45000, 5000, 15_000)).member_epoch == 2
        assert groups.heartbeat(_hb("m2", 2, owned={}), MemberTimeouts(45000, 5000, 0)).member_epoch == 3
        assert groups.groups["g"].assignment_epoch == 3
        groups.stop()
    asyncio.run(run())


def test_a_member_that_leaves_a_topic_gives_it_up_before_the_next_target():
    """At the target's epoch, a member's new subscription is acted on at once (Kafka's
    updateCurrentAssignment): the topic it left is revoked; the old target, still in force, gives it
    nothing of that topic once revoked; the next target, after the interval, has it elsewhere or nowhere."""
    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 2), "b": (B, 2)}, clock)
        first = groups.heartbeat(_hb("m1", 0, subscribed=["a", "b"]), PACED)
        assert first.assignment == {A: {0, 1}, B: {0, 1}}
        group, member = groups.groups["g"], groups.groups["g"].members["m1"]
        clock.now_ms += 100
        left = groups.heartbeat(_hb("m1", 2, owned={A: {0, 1}, B: {0, 1}}, subscribed=["a"]), PACED)
        assert (group.group_epoch, group.assignment_epoch) == (3, 2)  # the target waits
        assert (left.member_epoch, left.assignment) == (2, {A: {0, 1}})
        assert (member.state, member.pending_revocation, member.previous_epoch) == (
            MemberState.UNREVOKED_PARTITIONS, {B: {0, 1}}, 2)
        revoked = groups.heartbeat(_hb("m1", 2, owned={A: {0, 1}}), PACED)
        # reconciled to the old target (epoch 2) without the topic it left: b is not given back
        assert (revoked.member_epoch, member.state, member.assigned) == (2, MemberState.STABLE, {A: {0, 1}})
        clock.now_ms += 900
        again = groups.heartbeat(_hb("m1", 2, owned={A: {0, 1}}), PACED)
        assert (again.member_epoch, group.assignment_epoch, group.target["m1"]) == (3, 3, {A: {0, 1}})
        groups.stop()
    asyncio.run(run())


def test_a_member_reporting_the_left_topic_gone_keeps_no_revocation():
    """The topic left at the target's epoch is already gone from what the member reports: it is dropped
    without a revocation (Kafka's ownsRevokedPartitions), still at the member's epoch."""
    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 1), "b": (B, 1)}, clock)
        groups.heartbeat(_hb("m1", 0, subscribed=["a", "b"]), PACED)
        clock.now_ms += 1
        answer = groups.heartbeat(_hb("m1", 2, owned={A: {0}}, subscribed=["a"]), PACED)
        member = groups.groups["g"].members["m1"]
        assert (answer.member_epoch, answer.assignment) == (2, {A: {0}})
        assert (member.state, member.pending_revocation, member.held_since) == (MemberState.STABLE, {}, {(A, 0): 2})
        groups.stop()
    asyncio.run(run())


def test_a_member_behind_a_waiting_target_is_given_nothing_of_a_deleted_topic():
    """A topic that goes moves the group epoch; the target waits, still giving the topic's partitions out. A
    member reconciling to it is given only the topics that still exist (Kafka filters the target by the
    member's subscribed topic ids)."""
    async def run():
        clock = Clock(1_000_000)
        view = {"now": {"a": (A, 1), "b": (B, 1)}}
        groups = _groups(lambda: view["now"], clock)
        both = dict(subscribed=["a", "b"], server_assignor="uniform")
        groups.heartbeat(_hb("m1", 0, **both), PACED)
        groups.heartbeat(_hb("m2", 0, **both), PACED)  # joins within the interval: nothing for it yet
        clock.now_ms += 1000
        groups.heartbeat(_hb("m1", 2, owned={A: {0}, B: {0}}), PACED)  # the target of epoch 3: one topic each
        group = groups.groups["g"]
        m1, m2 = group.members["m1"], group.members["m2"]
        (kept,), (given,) = group.target["m1"], group.target["m2"]
        groups.heartbeat(_hb("m1", 2, owned={kept: {0}}), PACED)  # m1 revoked m2's topic
        assert (m1.epoch, m1.assigned, m2.epoch) == (3, {kept: {0}}, 2)
        view["now"] = {n: t for n, t in view["now"].items() if t[0] != given}  # m2's topic is deleted
        clock.now_ms += 10
        answer = groups.heartbeat(_hb("m2", 2, owned={}), PACED)
        assert (group.group_epoch, group.assignment_epoch, group.target["m2"]) == (4, 3, {given: {0}})
        assert (answer.member_epoch, answer.assignment, m2.state) == (3, None, MemberState.STABLE)
        assert m2.assigned == {}
        groups.stop()
    asyncio.run(run())
