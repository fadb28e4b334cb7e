"""The assignment interval of share groups (KIP-1263, `share.assignment.interval.ms`), without a broker: the
group epoch moves at once, a new target waits until the interval since the last computation has passed
(member_group.new_target_now, the rule consumer groups follow too), and meanwhile a member is given the
target it has, at that target's epoch, only of the topics it still subscribes to; the share-partitions'
initialization does not wait for it, their assignment does; the time of the last target is written in
record 12 and read back."""

from __future__ import annotations

import asyncio
import uuid

from broker.group.share_groups import ShareGroups, ShareHeartbeat
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode
from tests.unit.test_consumer_group_assignment_interval import Clock
from tests.unit.test_consumer_group_records import Log

A, B = uuid.UUID(int=1), uuid.UUID(int=2)
PACED = MemberTimeouts(45000, 5000, 1000)


def _groups(topics: dict, clock: Clock, log: Log | None = None) -> ShareGroups:
    return ShareGroups(100, topics.get, other_kind=lambda g: False, append=(log or Log()).append,
                       spawn=asyncio.get_running_loop().create_task, clock=clock)


async def _beat(groups: ShareGroups, member: str, epoch: int, topics: list[str] | None = None,
                timeouts: MemberTimeouts = PACED):
    return await groups.heartbeat(ShareHeartbeat("g", member, epoch, None, topics, "c", "/h"), timeouts)


def test_the_group_epoch_moves_at_once_and_the_target_after_the_interval():
    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 4)}, clock)
        first = await _beat(groups, "m1", 0, ["a"])
        assert (first.member_epoch, first.assignment) == (1, {A: {0, 1, 2, 3}})  # the first target: at once
        group = groups.groups["g"]
        assert group.assignment_ms == 1_000_000
        clock.now_ms += 500
        joined = await _beat(groups, "m2", 0, ["a"])
        # The group epoch moved; the target did not: m2 is given the target it has (nothing), at its epoch.
        assert (group.group_epoch, group.assignment_epoch) == (2, 1)
        assert (joined.member_epoch, joined.assignment) == (1, {})
        clock.now_ms += 499
        held = await _beat(groups, "m1", 1)
        assert (held.member_epoch, held.assignment, group.assignment_epoch) == (1, None, 1)
        clock.now_ms += 1  # the interval has passed: this heartbeat computes the target of epoch 2
        moved = await _beat(groups, "m1", 1)
        assert (group.assignment_epoch, group.assignment_ms) == (2, 1_001_000)
        assert (moved.member_epoch, moved.assignment) == (2, {A: {0, 1}})
        taken = await _beat(groups, "m2", 1)
        assert (taken.member_epoch, taken.assignment) == (2, {A: {2, 3}})
        groups.stop()
    asyncio.run(run())


def test_a_member_leaving_moves_the_target_only_after_the_interval():
    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 4)}, clock)
        await _beat(groups, "m1", 0, ["a"])
        await _beat(groups, "m2", 0, ["a"])
        clock.now_ms += 1000
        assert (await _beat(groups, "m1", 1)).member_epoch == 2
        await _beat(groups, "m2", 1)
        group = groups.groups["g"]
        clock.now_ms += 10
        await _beat(groups, "m2", -1)
        assert (group.group_epoch, group.assignment_epoch) == (3, 2)
        # m1 keeps its half while the target waits; m2's half goes to nobody until then.
        assert (await _beat(groups, "m1", 2)).member_epoch == 2
        assert group.members["m1"].assignment == {A: {0, 1}}
        clock.now_ms += 990
        whole = await _beat(groups, "m1", 2)
        assert (whole.member_epoch, whole.assignment) == (3, {A: {0, 1, 2, 3}})
        groups.stop()
    asyncio.run(run())


def test_a_member_at_the_target_epoch_leaving_a_topic_gives_it_up_at_once():
    """As Kafka's ShareGroupAssignmentBuilder: its subscription changed, so it is given the target it has of
    the topics it still subscribes to; the answer carries its assignment, as to any heartbeat that sends
    its subscription."""
    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 2), "b": (B, 2)}, clock)
        first = await _beat(groups, "m1", 0, ["a", "b"])
        assert first.assignment == {A: {0, 1}, B: {0, 1}}
        clock.now_ms += 10
        left = await _beat(groups, "m1", 1, ["a"])
        group = groups.groups["g"]
        assert (group.group_epoch, group.assignment_epoch) == (2, 1)
        assert (left.member_epoch, left.assignment) == (1, {A: {0, 1}})
        same = await _beat(groups, "m1", 1, ["a"])  # the same subscription sent again: still answered
        assert (same.member_epoch, same.assignment) == (1, {A: {0, 1}})
        assert (await _beat(groups, "m1", 1)).assignment is None
        # Subscribing again within the interval: the target it has still holds b's partitions.
        back = await _beat(groups, "m1", 1, ["a", "b"])
        assert (back.member_epoch, back.assignment) == (1, {A: {0, 1}, B: {0, 1}})
        groups.stop()
    asyncio.run(run())


def test_a_member_at_the_target_epoch_gives_up_a_deleted_topic_at_the_heartbeat_that_sees_it():
    """As Kafka: a topic gone moves the group epoch, and the member whose heartbeat notices it is given the
    target it has of the topics that still exist, while the new target waits for the interval."""
    async def run():
        clock = Clock(1_000_000)
        topics = {"a": (A, 2), "b": (B, 2)}
        groups = _groups(topics, clock)
        first = await _beat(groups, "m1", 0, ["a", "b"])
        assert first.assignment == {A: {0, 1}, B: {0, 1}}
        clock.now_ms += 10
        del topics["b"]
        noticed = await _beat(groups, "m1", 1)
        group = groups.groups["g"]
        assert (group.group_epoch, group.assignment_epoch) == (2, 1)
        assert (noticed.member_epoch, noticed.assignment) == (1, {A: {0, 1}})
        assert group.members["m1"].assignment == {A: {0, 1}}
        groups.stop()
    asyncio.run(run())


def test_the_same_topics_in_another_order_are_no_new_subscription():
    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 2), "b": (B, 2)}, clock)
        await _beat(groups, "m1", 0, ["a", "b"])
        again = await _beat(groups, "m1", 1, ["b", "a"])
        assert (groups.groups["g"].group_epoch, again.member_epoch) == (1, 1)
        groups.stop()
    asyncio.run(run())


def test_the_interval_in_force_is_the_one_each_heartbeat_brings():
    """The group's share.assignment.interval.ms (else the broker's) as read for that heartbeat: shortened
    or set to 0 between heartbeats, the next one computes the target."""
    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 4)}, clock)
        await _beat(groups, "m1", 0, ["a"], MemberTimeouts(45000, 5000, 3_600_000))
        clock.now_ms += 5000
        await _beat(groups, "m2", 0, ["a"], MemberTimeouts(45000, 5000, 3_600_000))
        group = groups.groups["g"]
        assert (group.group_epoch, group.assignment_epoch) == (2, 1)
        assert (await _beat(groups, "m1", 1, timeouts=MemberTimeouts(45000, 5000, 5001))).member_epoch == 1
        assert (await _beat(groups, "m1", 1, timeouts=MemberTimeouts(45000, 5000, 0))).member_epoch == 2
        groups.stop()
    asyncio.run(run())


def test_initialization_goes_on_while_the_target_waits_and_its_partitions_wait_for_the_interval():
    """Kafka asks the share coordinators at the heartbeat whatever the target: a member subscribing to a
    new topic within the interval has its partitions initialized; the heartbeat after that finds them
    initialized and not given out, moves the group epoch, and the target assigning them waits until the
    interval since the last one has passed."""
    asked: list[tuple[int, dict]] = []

    async def initialize(group_id: str, epoch: int, partitions: dict) -> ErrorCode:
        asked.append((epoch, {t: set(p) for t, p in partitions.items()}))
        return ErrorCode.NONE

    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 2), "b": (B, 2)}, clock)
        groups.initialize_states = initialize

        async def initialized() -> None:
            await asyncio.gather(*(t for tasks in groups._initializing.values() for t in tasks))

        first = await _beat(groups, "m1", 0, ["a"])
        assert (first.member_epoch, first.assignment) == (1, {})  # nothing initialized yet
        await initialized()
        clock.now_ms += 1000
        got = await _beat(groups, "m1", 1)
        assert (got.member_epoch, got.assignment) == (2, {A: {0, 1}})
        clock.now_ms += 10
        await _beat(groups, "m1", 2, ["a", "b"])  # within the interval: b asked at once, not given out
        await initialized()
        assert asked[-1] == (3, {B: {0, 1}})
        group = groups.groups["g"]
        clock.now_ms += 10
        assert (await _beat(groups, "m1", 2)).member_epoch == 2
        assert (group.group_epoch, group.assignment_epoch) == (3, 2)
        clock.now_ms += 979
        assert (await _beat(groups, "m1", 2)).member_epoch == 2
        clock.now_ms += 1
        now = await _beat(groups, "m1", 2)
        assert (now.member_epoch, now.assignment) == (3, {A: {0, 1}, B: {0, 1}})
        groups.stop()
    asyncio.run(run())


def test_the_time_of_the_last_target_is_read_back_so_the_interval_runs_on():
    log = Log()

    async def run():
        clock = Clock(1_000_000)
        groups = _groups({"a": (A, 4)}, clock, log)
        await _beat(groups, "m1", 0, ["a"])
        groups.stop()
        again = _groups({"a": (A, 4)}, clock, log)
        for key, value in log.records:
            again.replay(key, value)
        again.loaded(45000, taken=lambda g: False)
        group = again.groups["g"]
        assert (group.assignment_epoch, group.assignment_ms) == (1, 1_000_000)
        clock.now_ms += 999
        assert (await _beat(again, "m2", 0, ["a"])).member_epoch == 1
        clock.now_ms += 1
        assert (await _beat(again, "m2", 1)).member_epoch == 2
        again.stop()
    asyncio.run(run())
