"""Online migration when a write fails or a member is refused (broker/group/consumer_groups.py,
consumer_classic.py, record_log.py): as Kafka's coordinator rolls back what a failed append or a refused
request would have changed, the upgrade, the downgrade and a classic member's join are undone, nothing is
left queued for a later write, and a restart replays the group as it was answered. Also a KIP-848 static
member taking over a classic static member's instance id."""

from __future__ import annotations

import asyncio

import pytest

from broker.app import Broker
from broker.config import build_config
from broker.group import consumer_protocol as cp
from broker.group.consumer_groups import ConsumerHeartbeat
from broker.group.group import GroupError
from protocol.errors import ErrorCode
from tests.unit.test_consumer_group_migration import (
    TIMEOUTS,
    _classic_group,
    _expiry_seen,
    _heartbeat,
    _join_request,
)


def _config(tmp_path, **extra: str):
    return build_config({
        "node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1", **extra})


async def _started(tmp_path, **extra: str) -> Broker:
    broker = Broker(_config(tmp_path, **extra))
    await broker.start()
    if broker.topics.get("t") is None:
        await broker.topics.create("t", 2, 1)
    return broker


async def _replayed(tmp_path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """What a restarted broker loads: (consumer groups' member ids, classic groups' member ids)."""
    again = await _started(tmp_path)
    try:
        return ({g: set(x.members) for g, x in again.groups.consumer.groups.items()},
                {g: set(x.members) for g, x in again.groups.groups.items() if x.members})
    finally:
        await again.stop()


async def _kip848_group(groups):
    """A consumer group of one KIP-848 member, "kip848", written: (its heartbeat's answer, the group)."""
    first = groups.consumer.heartbeat(_heartbeat("kip848", 0), TIMEOUTS)
    await groups.consumer.persist("g", "kip848")
    return first, groups.consumer.groups["g"]


def _fail_next_write_when(groups, release: asyncio.Event) -> asyncio.Event:
    """The group records' next append fails once `release` is set; the event returned is set as it starts."""
    records = groups.consumer.records
    real, started = records._append, asyncio.Event()

    async def failing(group_id, entries):
        records._append = real
        started.set()
        await release.wait()
        raise GroupError(ErrorCode.NOT_COORDINATOR, "the write failed")
    records._append = failing
    return started


def _fail_next_write(groups) -> None:
    """The group records' next append fails as a lost leadership does; later ones are written."""
    records = groups.consumer.records
    real = records._append

    async def failing(group_id, entries):
        records._append = real
        raise GroupError(ErrorCode.NOT_COORDINATOR, "the write failed")
    records._append = failing


async def test_a_failed_upgrade_write_leaves_the_group_classic(tmp_path):
    broker = await _started(tmp_path)
    try:
        groups = broker.groups
        leader, follower, generation = await _classic_group(groups)
        _fail_next_write(groups)
        groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
        with pytest.raises(GroupError):
            await groups.consumer.persist("g", "new")
        classic = groups.groups["g"]
        assert "g" not in groups.consumer.groups and set(classic.members) == {leader, follower}
        assert groups.heartbeat("g", generation, leader, None) == ErrorCode.NONE  # its session runs on
        assert not groups.consumer.records._before and not groups.consumer.records._undo
        # The member comes again: upgraded, and written.
        groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
        await groups.consumer.persist("g", "new")
    finally:
        await broker.stop()
    assert await _replayed(tmp_path) == ({"g": {leader, follower, "new"}}, {})


async def test_a_failed_downgrade_write_keeps_the_consumer_group_and_queues_nothing(tmp_path):
    broker = await _started(tmp_path)
    try:
        groups = broker.groups
        leader, follower, generation = await _classic_group(groups)
        joined = groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
        await groups.consumer.persist("g", "new")
        group = groups.consumer.groups["g"]
        _fail_next_write(groups)
        groups.consumer.heartbeat(_heartbeat("new", -1), TIMEOUTS)
        with pytest.raises(GroupError):
            await groups.consumer.persist("g")
        # As before the leave: a consumer group with all three, their sessions running; nothing queued.
        assert "g" not in groups.groups and groups.consumer.groups["g"] is group
        assert set(group.members) == {leader, follower, "new"}
        assert all(m.session_timer is not None for m in group.members.values())
        assert not groups.consumer.records._after and not groups.consumer.records._undo
        assert groups.consumer.heartbeat(_heartbeat("new", joined.member_epoch), TIMEOUTS).member_epoch > 0
        # The leave again, written: classic, and so after a restart.
        groups.consumer.heartbeat(_heartbeat("new", -1), TIMEOUTS)
        await groups.consumer.persist("g")
        assert set(groups.groups["g"].members) == {leader, follower}
    finally:
        await broker.stop()
    assert await _replayed(tmp_path) == ({}, {"g": {leader, follower}})


async def test_a_failed_classic_join_write_undoes_the_join_and_a_too_large_member_is_refused_first(tmp_path):
    broker = await _started(tmp_path)
    try:
        groups = broker.groups
        first, group = await _kip848_group(groups)
        epochs = (group.group_epoch, group.assignment_epoch, {m: dict(t) for m, t in group.target.items()})
        _fail_next_write(groups)
        refused = await groups.join_group(_join_request())
        assert refused.error == ErrorCode.NOT_COORDINATOR
        assert set(group.members) == {"kip848"}
        assert (group.group_epoch, group.assignment_epoch, group.target) == epochs
        # Protocol metadata no record can hold: refused before anything changes, and the group's writes go on.
        big = _join_request()
        big.protocols = [*big.protocols, ("big", b"\x00\x01" + b"x" * 1_100_000)]
        records, appends = groups.consumer.records, []
        real = records._append
        records._append = lambda group_id, entries: appends.append(entries) or real(group_id, entries)
        assert (await groups.join_group(big)).error == ErrorCode.UNKNOWN_SERVER_ERROR
        assert set(group.members) == {"kip848"} and appends == []  # not even tried
        records._append = real
        groups.consumer.heartbeat(_heartbeat("kip848", first.member_epoch), TIMEOUTS)
        await groups.consumer.persist("g", "kip848")
    finally:
        await broker.stop()
    assert await _replayed(tmp_path) == ({"g": {"kip848"}}, {})


async def test_a_kip848_static_member_takes_over_a_classic_static_members_instance(tmp_path):
    """Kafka checks that an instance id is released only when both members speak KIP-848's protocol."""
    broker = await _started(tmp_path)
    try:
        groups = broker.groups
        requests = [_join_request() for _ in range(2)]
        for request, instance in zip(requests, ("i1", "i2"), strict=True):
            request.group_instance_id = instance
        a, b = await asyncio.gather(*(groups.join_group(r) for r in requests))
        leader = a if a.members else b
        assignment = [(a.member_id, cp.encode_assignment(1, {"t": {0}})),
                      (b.member_id, cp.encode_assignment(1, {"t": {1}}))]
        synced = await asyncio.gather(*(
            groups.sync_group("g", x.generation_id, x.member_id, i, None, None, assignment if x is leader else [])
            for x, i in ((a, "i1"), (b, "i2"))))
        assert [s.error for s in synced] == [ErrorCode.NONE, ErrorCode.NONE]
        static = ConsumerHeartbeat("g", "new", 0, "i1", None, 30_000, ["t"], None, None, {}, "kip848", "/127.0.0.1")
        answer = groups.consumer.heartbeat(static, TIMEOUTS)
        await groups.consumer.persist("g", "new")
        group = groups.consumer.groups["g"]
        assert "g" not in groups.groups and set(group.members) == {"new", b.member_id}
        assert group.members["new"].classic is None and group.members["new"].instance_id == "i1"
        t = broker._consumer_topics()["t"][0]
        assert answer.member_epoch > 0 and group.members["new"].assigned == {t: {0}}
    finally:
        await broker.stop()


async def test_an_upgrade_for_a_member_refused_leaves_the_group_classic(tmp_path):
    """GROUP_MAX_SIZE_REACHED for the member that would upgrade the group: Kafka leaves it classic."""
    broker = await _started(tmp_path, **{"group.consumer.max.size": "2"})
    try:
        groups = broker.groups
        leader, follower, generation = await _classic_group(groups)
        with pytest.raises(GroupError) as refused:
            groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
        assert refused.value.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
        assert "g" not in groups.consumer.groups and set(groups.groups["g"].members) == {leader, follower}
        assert groups.heartbeat("g", generation, leader, None) == ErrorCode.NONE
        assert not groups.consumer.records._before and not groups.consumer.records._undo
    finally:
        await broker.stop()


async def test_a_classic_member_syncs_though_a_member_left_after_its_join(tmp_path):
    """Kafka refuses a classic member's SyncGroup, and its Heartbeat tells it to rejoin, only when the target
    moved past its epoch: a member leaving moves the group epoch alone."""
    broker = await _started(tmp_path)
    try:
        groups = broker.groups
        groups.consumer.heartbeat(_heartbeat("kip848", 0), TIMEOUTS)
        joined = [await groups.join_group(_join_request(version=3)) for _ in range(2)]
        group = groups.consumer.groups["g"]
        leaves, stays = (group.members[j.member_id] for j in joined)
        stays_epoch = joined[1].generation_id
        assert await groups.leave_group("g", [(leaves.member_id, None)]) == (ErrorCode.NONE, [ErrorCode.NONE])
        assert group.group_epoch > group.assignment_epoch == stays_epoch
        assert groups.heartbeat("g", stays_epoch, stays.member_id, None) == ErrorCode.NONE
        assert set(stays.classic_timers) == {"sync"}
        synced = await groups.sync_group("g", stays_epoch, stays.member_id, None, "consumer", "range", [])
        assert synced.error == ErrorCode.NONE and not stays.classic_timers
        # The KIP-848 member's heartbeat moves the target: now it must rejoin, and a sync is refused.
        groups.consumer.heartbeat(_heartbeat("kip848", group.members["kip848"].epoch), TIMEOUTS)
        assert group.assignment_epoch == group.group_epoch > stays_epoch
        assert groups.heartbeat("g", stays_epoch, stays.member_id, None) == ErrorCode.REBALANCE_IN_PROGRESS
        assert set(stays.classic_timers) == {"join"}
        synced = await groups.sync_group("g", stays_epoch, stays.member_id, None, "consumer", "range", [])
        assert synced.error == ErrorCode.REBALANCE_IN_PROGRESS
    finally:
        await broker.stop()


async def test_classic_requests_for_a_mixed_group_of_a_stopping_coordinator_are_coordinator_not_available(tmp_path):
    broker = await _started(tmp_path)
    try:
        groups = broker.groups
        groups.consumer.heartbeat(_heartbeat("kip848", 0), TIMEOUTS)
        joined = await groups.join_group(_join_request(version=3))
        assert joined.error == ErrorCode.NONE
        groups.begin_shutdown()
        unavailable = ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert (await groups.join_group(_join_request(joined.member_id))).error == unavailable
        synced = await groups.sync_group("g", joined.generation_id, joined.member_id, None, None, None, [])
        assert synced.error == unavailable
        assert groups.heartbeat("g", joined.generation_id, joined.member_id, None) == unavailable
        assert (await groups.leave_group("g", [(joined.member_id, None)]))[0] == unavailable
        assert joined.member_id in groups.consumer.groups["g"].members
    finally:
        await broker.stop()


async def test_a_classic_assignment_written_after_an_upgrade_does_not_undo_it(tmp_path):
    """The leader's SyncGroup spawns the classic group's record; an upgrade in between writes its own records
    first: the classic record, now stale, is not written after them (a restart would load the classic group)."""
    broker = await _started(tmp_path)
    try:
        groups = broker.groups
        leader, follower, generation = await _classic_group(groups)
        rejoined = await asyncio.gather(*(groups.join_group(_join_request(m)) for m in (leader, follower)))
        assignment = [(leader, cp.encode_assignment(1, {"t": {0}})), (follower, cp.encode_assignment(1, {"t": {1}}))]
        syncs = [asyncio.create_task(groups.sync_group("g", j.generation_id, j.member_id, None, None, None,
                                                       assignment if j.members else [])) for j in rejoined]
        await asyncio.sleep(0)  # a yield, no wait: both syncs park, the assignment's write is spawned, not begun
        groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
        await groups.consumer.persist("g", "new")
        assert {s.error for s in await asyncio.gather(*syncs)} == {ErrorCode.REBALANCE_IN_PROGRESS}
    finally:
        await broker.stop()
    assert await _replayed(tmp_path) == ({"g": {leader, follower, "new"}}, {})


async def test_a_failed_classic_join_write_keeps_what_another_member_changed_meanwhile(tmp_path):
    """While the join's write is in flight a KIP-848 member heartbeats (and is answered): when the write
    fails, only the member the join added goes; the other member's new epoch stands."""
    broker = await _started(tmp_path)
    try:
        groups = broker.groups
        first, group = await _kip848_group(groups)
        release = asyncio.Event()
        started = _fail_next_write_when(groups, release)
        join = asyncio.create_task(groups.join_group(_join_request()))
        await started.wait()
        revoking = groups.consumer.heartbeat(_heartbeat("kip848", first.member_epoch, owned=first.assignment),
                                             TIMEOUTS)  # gives a partition up to the joining member
        answer = groups.consumer.heartbeat(_heartbeat("kip848", revoking.member_epoch, owned=revoking.assignment),
                                           TIMEOUTS)
        assert answer.member_epoch > first.member_epoch  # it moved to the epoch the join made
        release.set()
        assert (await join).error == ErrorCode.NOT_COORDINATOR
        kept = group.members["kip848"]
        assert set(group.members) == {"kip848"} and kept.epoch == answer.member_epoch
        assert kept.assigned == revoking.assignment
    finally:
        await broker.stop()


async def test_a_heartbeat_answered_while_an_upgrade_write_fails_fails_with_it(tmp_path):
    """Kafka fails every write after a failed one (its state goes back to the last written): a member that
    joined the upgraded group while the upgrade's write was in flight is told the error, not welcomed."""
    broker = await _started(tmp_path)
    try:
        groups = broker.groups
        leader, follower, generation = await _classic_group(groups)
        release = asyncio.Event()
        started = _fail_next_write_when(groups, release)
        groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
        upgrade = asyncio.create_task(groups.consumer.persist("g", "new"))
        await started.wait()
        groups.consumer.heartbeat(_heartbeat("other", 0), TIMEOUTS)
        other = asyncio.create_task(groups.consumer.persist("g", "other"))
        release.set()
        results = await asyncio.gather(upgrade, other, return_exceptions=True)
        assert [r.error_code for r in results if isinstance(r, GroupError)] == [ErrorCode.NOT_COORDINATOR] * 2
        assert "g" not in groups.consumer.groups and set(groups.groups["g"].members) == {leader, follower}
    finally:
        await broker.stop()
    assert await _replayed(tmp_path) == ({}, {"g": {leader, follower}})


async def test_a_timed_out_member_whose_leaving_cannot_downgrade_the_group_stays_and_is_tried_again(tmp_path):
    """The classic member's second protocol is not the consumer protocol and the classic group would choose
    it: the KIP-848 member's session ends, the downgrade cannot be made, and it stays (Kafka removes
    nobody), its session armed again."""
    broker = await _started(tmp_path)
    try:
        groups = broker.groups
        _, group = await _kip848_group(groups)
        request = _join_request(version=3)
        request.protocols = [("roundrobin", request.protocols[0][1]), ("range", b"")]
        other = _join_request(version=3)
        other.protocols = [("range", other.protocols[0][1]), ("roundrobin", b"")]
        assert {(await groups.join_group(r)).error for r in (request, other)} == {ErrorCode.NONE}
        fired = _expiry_seen(groups)
        member = group.members["kip848"]
        groups.consumer.arm_session(group, member, 10)
        await asyncio.wait_for(fired.wait(), 10)
        assert "kip848" in group.members and "g" not in groups.groups
        assert member.session_timer is not None and member.session_timeout_ms == 10
        member.cancel_timers()
    finally:
        await broker.stop()
