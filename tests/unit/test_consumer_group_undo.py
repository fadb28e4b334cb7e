"""A KIP-848 consumer group change whose write to __consumer_offsets fails is undone, as Kafka's coordinator
reverts to its last committed state (broker/group/consumer_groups.py heartbeat_written): a join not kept
nor counted toward group.consumer.max.size, a leave keeping the member, a subscription change's epochs,
target and member state put back, a timer's removal tried again; and members loaded from the log run on
their group's own session timeout once it is read."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from broker.group.consumer_group import MemberState
from broker.group.consumer_groups import ConsumerGroups
from broker.group.consumer_type_changes import ClassicIds
from broker.group.group import GroupError
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode
from tests.unit.test_consumer_group_records import T1, TIMEOUTS, Log, _hb, _types, session_left_after_load


def _groups(log: Log, max_size: int = 100, clock: Callable[[], int] | None = None) -> ConsumerGroups:
    topics = {"a": (T1, 4), "b": (T1.__class__(int=2), 2)}
    return ConsumerGroups(max_size, ["uniform"], lambda: topics,
                          ClassicIds(lambda g: False, lambda g: False, lambda g: None), is_share=lambda g: False,
                          append=log.append, spawn=lambda coro: asyncio.get_running_loop().create_task(coro),
                          **({} if clock is None else {"clock": clock}))


def _replayed(log: Log) -> ConsumerGroups:
    groups = _groups(log)
    for key, value in log.records:
        groups.replay(key, value)
    groups.loaded(45000)
    return groups


def _state(groups: ConsumerGroups) -> tuple:
    group = groups.groups["g"]
    return (group.group_epoch, group.assignment_epoch, group.assignment_ms, group.assignor,
            {m: dict(t) for m, t in group.target.items()},
            dict(group.topics), {mid: (m.epoch, m.previous_epoch, m.state, dict(m.assigned),
                                       dict(m.pending_revocation), list(m.subscribed))
                                 for mid, m in group.members.items()})


def test_a_heartbeat_whose_write_fails_leaves_the_group_as_it_was():
    log = Log()

    async def run():
        groups = _groups(log, max_size=2)
        one = await groups.heartbeat_written(_hb("m1", 0), TIMEOUTS)
        one = await groups.heartbeat_written(_hb("m1", one.member_epoch, owned={T1: {0, 1, 2, 3}}), TIMEOUTS)
        before = _state(groups)
        log.fail = ErrorCode.NOT_ENOUGH_REPLICAS
        with pytest.raises(GroupError) as caught:  # a join
            await groups.heartbeat_written(_hb("x", 0), TIMEOUTS)
        assert caught.value.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert _state(groups) == before
        with pytest.raises(GroupError):  # a subscription change: epochs, target, member as they were
            await groups.heartbeat_written(_hb("m1", one.member_epoch, owned={T1: {0, 1, 2, 3}},
                                               subscribed=["a", "b"], rack_id="r9"), TIMEOUTS)
        assert _state(groups) == before and groups.groups["g"].members["m1"].rack_id is None
        with pytest.raises(GroupError):  # a leave: the member stays, its session running
            await groups.heartbeat_written(_hb("m1", -1), TIMEOUTS)
        member = groups.groups["g"].members["m1"]
        assert _state(groups) == before and member.session_timer is not None
        with pytest.raises(GroupError):  # a group a join would make is not kept
            await groups.heartbeat_written(_hb("m", 0, group_id="new"), TIMEOUTS)
        assert set(groups.groups) == {"g"}
        log.fail = None
        # The failed join was not counted toward max size 2; memory and the log agree.
        two = await groups.heartbeat_written(_hb("m2", 0), TIMEOUTS)
        assert two.member_epoch == before[0] + 1
        rebuilt = _replayed(log)
        assert _state(rebuilt) == _state(groups)
        rebuilt.stop()
        left = await groups.heartbeat_written(_hb("m1", -1), TIMEOUTS)  # the retried leave
        assert left.member_epoch == -1 and set(groups.groups["g"].members) == {"m2"}
        assert member.session_timer is None
        groups.stop()
    asyncio.run(run())


def test_a_revocation_not_written_is_undone_with_its_deadline():
    """A member told to revoke (a join moved the target) whose heartbeat's write fails: it is back to
    holding everything, with no revocation deadline running, and the next written heartbeat goes on."""
    log = Log()

    async def run():
        groups = _groups(log)
        one = await groups.heartbeat_written(_hb("m1", 0), TIMEOUTS)
        one = await groups.heartbeat_written(_hb("m1", one.member_epoch, owned={T1: {0, 1, 2, 3}}), TIMEOUTS)
        await groups.heartbeat_written(_hb("m2", 0), TIMEOUTS)
        before = _state(groups)
        log.fail = ErrorCode.NOT_COORDINATOR
        with pytest.raises(GroupError):
            await groups.heartbeat_written(_hb("m1", one.member_epoch, owned={T1: {0, 1, 2, 3}}), TIMEOUTS)
        member = groups.groups["g"].members["m1"]
        assert _state(groups) == before and member.state == MemberState.STABLE and member.rebalance_timer is None
        log.fail = None
        again = await groups.heartbeat_written(_hb("m1", one.member_epoch, owned={T1: {0, 1, 2, 3}}), TIMEOUTS)
        assert member.state == MemberState.UNREVOKED_PARTITIONS and member.rebalance_timer is not None
        assert again.member_epoch == one.member_epoch
        rebuilt = _replayed(log)
        assert _state(rebuilt) == _state(groups)
        rebuilt.stop()
        groups.stop()
    asyncio.run(run())


def test_a_target_computed_by_a_failed_write_leaves_the_interval_running_from_the_one_before():
    """The assignment interval counts from the last target written: a target computed by a heartbeat whose
    write fails is undone with its time, so the member's retry computes it again at once (not an interval
    after the failed computation)."""
    log, now = Log(), [1_000_000]
    paced = MemberTimeouts(45000, 5000, 1000)

    async def run():
        groups = _groups(log, clock=lambda: now[0])
        await groups.heartbeat_written(_hb("m1", 0), paced)  # the first target: at once
        now[0] += 400
        await groups.heartbeat_written(_hb("m2", 0), paced)  # within the interval: the target waits
        group = groups.groups["g"]
        before = _state(groups)
        assert (group.group_epoch, group.assignment_epoch, group.assignment_ms) == (3, 2, 1_000_000)
        now[0] += 700  # the interval has passed: m1's heartbeat computes the target, but its write fails
        log.fail = ErrorCode.NOT_ENOUGH_REPLICAS
        with pytest.raises(GroupError):
            await groups.heartbeat_written(_hb("m1", 2, owned={T1: {0, 1, 2, 3}}), paced)
        assert _state(groups) == before
        log.fail = None
        now[0] += 10  # well within an interval of the failed computation
        await groups.heartbeat_written(_hb("m1", 2, owned={T1: {0, 1, 2, 3}}), paced)
        assert (group.assignment_epoch, group.assignment_ms) == (3, now[0])
        groups.stop()
    asyncio.run(run())


def test_a_session_expiry_whose_write_fails_is_tried_again():
    async def run():
        log = Log()
        attempts, tried = log.attempts, log.tried
        groups = _groups(log)
        await groups.heartbeat_written(_hb("m1", 0), TIMEOUTS)
        await groups.heartbeat_written(_hb("m2", 0), MemberTimeouts(20, 5000, 0))
        group = groups.groups["g"]
        epoch = group.group_epoch
        tried.clear()
        log.fail = ErrorCode.NOT_ENOUGH_REPLICAS
        await asyncio.wait_for(tried.wait(), 10)  # the expiry's write, refused
        for _ in range(3):
            await asyncio.sleep(0)
        member = group.members["m2"]
        assert member.session_timer is not None and group.group_epoch == epoch  # kept, its session armed again
        tried.clear()
        log.fail = None
        await asyncio.wait_for(tried.wait(), 10)  # tried again after another session
        assert "m2" not in group.members and attempts[-1] is True and group.group_epoch == epoch + 1
        assert _types(log.records[-4:]) == [(8, True), (7, True), (5, True), (3, False)]  # m2's tombstones
        assert set(_replayed(log).groups["g"].members) == {"m1"}
        groups.stop()
    asyncio.run(run())


def test_loaded_members_are_timed_by_the_groups_own_session_timeout():
    async def run():
        log = Log()
        groups = _groups(log)
        await groups.heartbeat_written(_hb("m1", 0), TIMEOUTS)
        groups.stop()
        restarted = _groups(log)
        for key, value in log.records:
            restarted.replay(key, value)
        left = await session_left_after_load(lambda read: restarted.loaded(45_000, group_session_ms=read),
                                             lambda: restarted.groups["g"].members["m1"])
        assert left <= 2.0
        restarted.stop()
    asyncio.run(run())

