"""Share group records of __consumer_offsets (broker/group/share_records.py): their bytes as Kafka's
specs lay them out, the writes a heartbeat makes (what changed, in Kafka's order; tombstones when a
member or the group goes), and a coordinator rebuilding the groups from the records it replays (epochs,
members and assignments kept, sessions running, a member carrying on without rejoining)."""

from __future__ import annotations

import asyncio
import struct
import time
import uuid

import pytest

from broker.group import share_records
from broker.group.group import GroupError
from broker.group.record_log import record_type, topics_hash
from broker.group.share_groups import ShareGroups, ShareHeartbeat
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode
from tests.unit.test_consumer_group_records import Log, session_left_after_load

T1 = uuid.UUID(int=1)
TIMEOUTS = MemberTimeouts(45000, 5000, 0)


def _groups(log: Log, partitions: int = 4) -> ShareGroups:
    return ShareGroups(100, lambda name: (T1, partitions) if name == "a" else None, other_kind=lambda g: False,
                       append=log.append, spawn=asyncio.get_running_loop().create_task)


async def _beat(groups: ShareGroups, member: str, epoch: int, rack: str | None = None):
    return await groups.heartbeat(ShareHeartbeat("g", member, epoch, rack, ["a"] if epoch == 0 else None, "c", "/h"),
                                  TIMEOUTS)


def _types(entries) -> list[tuple[int, bool]]:
    return [(record_type(k), v is None) for k, v in entries]


def test_record_bytes_follow_kafkas_layout_and_order():
    log = Log()

    async def run():
        groups = _groups(log)
        before = time.time_ns() // 1_000_000
        await _beat(groups, "m1", 0, rack="r1")
        groups.stop()
        return before, time.time_ns() // 1_000_000
    before, after = asyncio.run(run())
    # One write: the subscription, the group epoch, the target, the target epoch, the current assignment.
    assert _types(log.records) == [(10, False), (11, False), (13, False), (12, False), (14, False)]
    by_type = {record_type(k): (k, v) for k, v in log.records}
    key, value = by_type[11]
    assert key == struct.pack(">hh", 11, 1) + b"g"
    # v0 | epoch 1 | hash | no tags
    assert value == struct.pack(">hiq", 0, 1, topics_hash({"a": (T1, 4)})) + b"\x00"
    key, value = by_type[14]
    assert key == struct.pack(">hh", 14, 1) + b"g" + struct.pack(">h", 2) + b"m1"
    # v0 | epoch 1 | previous 0 | state 0 | one topic (T1, [0..3], no tags) | no tags
    assert value == (struct.pack(">hiib", 0, 1, 0, 0) + b"\x02" + T1.bytes + b"\x05" + struct.pack(">4i", 0, 1, 2, 3)
                     + b"\x00" + b"\x00")
    key, value = by_type[10]
    # v0 | rack "r1" | client "c" | host "/h" | ["a"] | no tags
    assert value == struct.pack(">h", 0) + b"\x03r1" + b"\x02c" + b"\x03/h" + b"\x02\x02a" + b"\x00"
    key, value = by_type[12]
    # v0 | epoch 1 | one tagged field: AssignmentTimestamp (tag 0, 8 bytes), when the target was computed
    assert value[:9] == struct.pack(">hi", 0, 1) + b"\x01\x00\x08"
    assert before <= struct.unpack(">q", value[9:])[0] <= after


def test_a_heartbeat_writes_what_changed_and_tombstones_what_went():
    log = Log()

    async def run():
        groups = _groups(log)
        await _beat(groups, "m1", 0)
        first = len(log.records)
        await _beat(groups, "m1", 1)
        assert len(log.records) == first  # nothing changed: nothing written
        await _beat(groups, "m2", 0)
        joined = _types(log.records[first:])
        assert (10, False) in joined and (11, False) in joined and joined.count((14, False)) == 1
        assert joined.count((13, False)) == 2  # the target moved for both
        mark = len(log.records)
        await _beat(groups, "m2", -1)
        # As Kafka: the member's tombstones and the group epoch; the target waits for the next heartbeat.
        assert _types(log.records[mark:]) == [(14, True), (13, True), (10, True), (11, False)]
        group = groups.groups["g"]
        assert group.assignment_epoch == group.group_epoch - 1 and set(group.target) == {"m1"}
        mark = len(log.records)
        answer = await _beat(groups, "m1", group.members["m1"].epoch)
        assert _types(log.records[mark:]) == [(13, False), (12, False), (14, False)]
        assert answer.member_epoch == group.group_epoch == group.assignment_epoch
        await _beat(groups, "m1", -1)
        # The group, now empty, is deleted: its own records go, the target epoch before the group epoch.
        mark = len(log.records)
        assert await groups.delete("g") == ErrorCode.NONE
        assert _types(log.records[mark:]) == [(12, True), (11, True)]
        groups.stop()
    asyncio.run(run())


def test_a_failed_append_is_the_heartbeats_error_and_its_change_is_undone():
    """As Kafka reverts to its last committed state: a join not written is not kept (nor counted toward
    group.share.max.size), a leave not written leaves the member in (a retried leave works), a group made
    by a join not written is not kept."""
    log = Log()
    released: list[tuple[str, str]] = []

    async def run():
        groups = ShareGroups(2, lambda name: (T1, 4) if name == "a" else None, other_kind=lambda g: False,
                             append=log.append, spawn=asyncio.get_running_loop().create_task)
        groups.member_left.append(lambda group_id, member_id: released.append((group_id, member_id)))
        one = await _beat(groups, "m1", 0)
        group = groups.groups["g"]
        epochs = (group.group_epoch, group.assignment_epoch, dict(group.target), one.member_epoch)
        log.fail = ErrorCode.NOT_COORDINATOR
        with pytest.raises(GroupError) as caught:
            await _beat(groups, "x", 0)
        assert caught.value.error_code == ErrorCode.NOT_COORDINATOR
        assert set(group.members) == {"m1"}
        assert (group.group_epoch, group.assignment_epoch, group.target, group.members["m1"].epoch) == epochs
        with pytest.raises(GroupError):  # a subscription change not written: the member as it was
            await groups.heartbeat(ShareHeartbeat("g", "m1", one.member_epoch, "r9", ["a", "b"], "c", "/h"), TIMEOUTS)
        member = group.members["m1"]
        assert (member.subscribed, member.rack_id, member.epoch) == (["a"], None, one.member_epoch)
        assert (group.group_epoch, group.assignment_epoch, group.target) == epochs[:3]
        with pytest.raises(GroupError):
            await _beat(groups, "m1", -1)
        assert set(group.members) == {"m1"} and group.members["m1"].session_timer is not None and not released
        with pytest.raises(GroupError):
            await groups.heartbeat(ShareHeartbeat("new", "m", 0, None, ["a"], "c", "/h"), TIMEOUTS)
        assert set(groups.groups) == {"g"}
        log.fail = None
        await _beat(groups, "m2", 0)  # max size 2 would refuse it had the failed join been counted
        rebuilt = share_records.KIND.group_from_records("g", groups.records.written["g"])
        assert rebuilt is not None and set(rebuilt[0].members) == {"m1", "m2"}
        left = await _beat(groups, "m1", -1)  # the retried leave
        assert left.left and "m1" not in group.members and released == [("g", "m1")]
        groups.stop()
    asyncio.run(run())


def test_a_restarted_coordinator_rebuilds_the_group_and_its_members_carry_on():
    log = Log()

    async def run():
        groups = _groups(log)
        one = await _beat(groups, "m1", 0, rack="r1")
        two = await _beat(groups, "m2", 0)
        one = await _beat(groups, "m1", one.member_epoch)
        before = groups.groups["g"]
        groups.stop()
        restarted = _groups(log)
        for key, value in log.records:
            restarted.replay(key, value)
        assert restarted.loaded(45000, taken=lambda g: False) == ["g"]
        group = restarted.groups["g"]
        assert (group.group_epoch, group.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert group.target == before.target and set(group.members) == {"m1", "m2"}
        member = group.members["m1"]
        assert (member.epoch, member.rack_id, member.subscribed, member.assignment) == (
            one.member_epoch, "r1", ["a"], before.members["m1"].assignment)
        assert member.session_timer is not None
        again = await _beat(restarted, "m2", two.member_epoch)  # no rejoin, no epoch bump
        assert again.member_epoch == two.member_epoch and group.group_epoch == before.group_epoch
        mark = len(log.records)
        await _beat(restarted, "m1", one.member_epoch)
        assert len(log.records) == mark  # what was replayed counts as written
        restarted.stop()
        # Topics grown while away: the next heartbeat bumps the epoch and hands the new partitions out.
        grown = _groups(log, partitions=6)
        for key, value in log.records:
            grown.replay(key, value)
        grown.loaded(45000, taken=lambda g: False)
        answer = await _beat(grown, "m1", one.member_epoch)
        assert answer.member_epoch == before.group_epoch + 1 and answer.assignment is not None
        # A deleted group's tombstones leave nothing to rebuild; another kind's id is not taken.
        grown.groups["g"].members.clear()
        assert await grown.delete("g") == ErrorCode.NONE
        grown.stop()
        empty = _groups(log)
        for key, value in log.records:
            empty.replay(key, value)
        assert empty.loaded(45000, taken=lambda g: False) == [] and not empty.records.written
        empty.stop()
    asyncio.run(run())


class _GatedLog(Log):
    """A log whose appends wait for `gate` once `hold` is set (`held` set while one waits)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.gate = asyncio.Event()
        self.held = asyncio.Event()

    async def append(self, group_id: str, entries) -> int:
        if self.hold:
            self.held.set()
            await self.gate.wait()
        return await super().append(group_id, entries)


def test_a_group_made_again_while_its_tombstones_are_in_flight_is_written_after_them():
    """AlterShareGroupOffsets' group is written before the answer (its failure is the request's error), and
    a group deleted then made again, its records the same bytes as the deleted one's, is written after the
    deletion's tombstones: the log ends with the group, as memory does."""
    async def run():
        log = _GatedLog()
        groups = _groups(log)
        log.fail = ErrorCode.NOT_ENOUGH_REPLICAS
        with pytest.raises(GroupError):
            await groups.ensure("g")
        assert "g" not in groups.groups
        log.fail = None
        await groups.ensure("g")
        made = dict(log.records)
        assert [record_type(k) for k in made] == [11, 12] and groups.records.written["g"] == made
        log.hold = True
        deleting = asyncio.create_task(groups.delete("g"))
        await log.held.wait()
        ensuring = asyncio.create_task(groups.ensure("g"))
        log.hold = False
        log.gate.set()
        assert await deleting == ErrorCode.NONE
        await ensuring
        assert "g" in groups.groups and groups.records.written["g"] == made
        assert log.records[-4:] == [*((k, None) for k in sorted(made, key=record_type, reverse=True)),
                                    *sorted(made.items(), key=lambda kv: record_type(kv[0]))]
        groups.stop()
    asyncio.run(run())


def test_a_write_landing_after_its_groups_unload_does_not_bring_its_records_back():
    async def run():
        log = _GatedLog()
        groups = _groups(log)
        log.hold = True
        joining = asyncio.create_task(_beat(groups, "m1", 0))
        await log.held.wait()
        groups.unload(lambda group_id: group_id == "g")
        log.gate.set()
        await joining
        assert "g" not in groups.records.written and "g" not in groups.groups
        groups.stop()
    asyncio.run(run())


def test_loaded_members_are_timed_by_the_groups_own_session_timeout():
    async def run():
        log = Log()
        groups = _groups(log)
        await _beat(groups, "m1", 0)
        groups.stop()
        restarted = _groups(log)
        for key, value in log.records:
            restarted.replay(key, value)
        left = await session_left_after_load(
            lambda read: restarted.loaded(45_000, taken=lambda g: False, group_session_ms=read),
            lambda: restarted.groups["g"].members["m1"])
        assert left <= 2.0
        restarted.stop()
    asyncio.run(run())


def test_an_expiry_whose_write_fails_keeps_the_member_and_is_tried_again():
    async def run():
        log = Log()
        attempts, tried = log.attempts, log.tried
        groups = _groups(log)
        gone = asyncio.Event()
        groups.member_left.append(lambda group_id, member_id: gone.set())
        await groups.heartbeat(ShareHeartbeat("g", "m1", 0, None, ["a"], "c", "/h"), MemberTimeouts(20, 5000, 0))
        tried.clear()
        log.fail = ErrorCode.NOT_ENOUGH_REPLICAS
        await tried.wait()  # the expiry's write, refused
        for _ in range(3):
            await asyncio.sleep(0)
        member = groups.groups["g"].members["m1"]
        assert member.session_timer is not None and not gone.is_set()  # kept, its session running again
        log.fail = None
        await gone.wait()
        assert "m1" not in groups.groups["g"].members and attempts[-1] is True
        assert _types(log.records[-4:]) == [(14, True), (13, True), (10, True), (11, False)]
        groups.stop()
    asyncio.run(run())


def test_a_group_whose_records_cannot_be_read_is_left_out_and_the_others_load():
    """record_log.GroupRecordLog.rebuilt, which both kinds' loads walk: a value without its version leaves
    its group out (its members join again), the next group still loads, and `taken` holds an id back."""
    log = Log()

    async def run():
        groups = _groups(log)
        for group_id in ("g", "h", "k"):
            await groups.heartbeat(ShareHeartbeat(group_id, "m1", 0, None, ["a"], "c", "/h"), TIMEOUTS)
        groups.stop()
        restarted = _groups(log)
        for key, value in log.records:
            restarted.replay(key, value)
        [bad] = [k for k in restarted.records.written["g"] if record_type(k) == share_records.TARGET_METADATA]
        restarted.records.written["g"][bad] = b"\xff"  # a value too short to carry its version
        assert restarted.loaded(45000, taken=lambda g: g == "k") == ["h"]
        assert set(restarted.groups) == {"h"} and restarted.groups["h"].members["m1"].session_timer is not None
        restarted.stop()
    asyncio.run(run())
