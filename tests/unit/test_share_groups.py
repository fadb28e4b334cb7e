"""The share group coordinator's parts without a broker (broker/group/share_groups.py, share_group.py):
the simple assignor's balance and stickiness over many shapes, and unloading a partition's groups."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.group.group import GroupError
from broker.group.member_group import check_joining
from broker.group.share_group import GROUP_TYPE, ShareGroup, ShareMember, assign
from broker.group.share_groups import ShareGroups, ShareHeartbeat
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _counts(result: dict) -> tuple[dict[str, int], dict[tuple, int]]:
    per_member = {m: sum(len(p) for p in a.values()) for m, a in result.items()}
    per_partition: dict[tuple, int] = {}
    for a in result.values():
        for t, parts in a.items():
            for p in parts:
                per_partition[(t, p)] = per_partition.get((t, p), 0) + 1
    return per_member, per_partition


@pytest.mark.parametrize("members", range(1, 9))
@pytest.mark.parametrize("partitions", range(1, 9))
def test_every_partition_given_and_members_balanced(members, partitions):
    topics = {"a": (T1, frozenset(range(partitions)))}
    ids = {f"m{i}": ["a"] for i in range(members)}
    result = assign(ids, topics, {})
    per_member, per_partition = _counts(result)
    sharing = -(-members // partitions)
    assert set(per_partition) == {(T1, p) for p in range(partitions)}
    assert max(per_partition.values()) <= sharing
    assert max(per_member.values()) - min(per_member.values()) <= 1
    # one more member joins: those who stay keep what the balance lets them keep
    grown = assign({**ids, "new": ["a"]}, topics, result)
    kept = sum(len(grown[m].get(T1, set()) & result[m].get(T1, set())) for m in ids)
    per_member, _ = _counts(grown)
    assert max(per_member.values()) - min(per_member.values()) <= 1
    assert kept >= sum(per_member[m] for m in ids) - members  # at most one partition moves per member


def test_members_subscribing_differently_get_only_their_topics():
    topics = {"a": (T1, frozenset({0, 1})), "b": (T2, frozenset({0}))}
    result = assign({"x": ["a"], "y": ["b"], "z": ["a", "b", "missing"]}, topics, {})
    assert set(result["x"]) == {T1} and set(result["y"]) == {T2}
    assert result["z"] == {T1: {0, 1}, T2: {0}}


async def _beat(groups: ShareGroups, group: str, member: str, epoch: int, topics: list[str] | None = None):
    return await groups.heartbeat(ShareHeartbeat(group, member, epoch, None, topics, "c", "/h"),
                                  MemberTimeouts(45000, 5000, 0))


async def _no_log(group_id: str, entries) -> int:
    return 0


def test_unload_forgets_the_groups_of_a_partition_and_their_timers():
    async def run() -> None:
        groups = ShareGroups(2, lambda name: (T1, 3) if name == "a" else None, other_kind=lambda g: g == "classic",
                             append=_no_log, spawn=asyncio.get_running_loop().create_task)
        await _beat(groups, "g1", "m", 0, ["a"])
        await _beat(groups, "g2", "m", 0, ["a"])
        timer = groups.groups["g1"].members["m"].session_timer
        groups.unload(lambda group_id: group_id == "g1")
        assert list(groups.groups) == ["g2"] and timer is not None and timer.cancelled()
        with pytest.raises(GroupError) as refused:
            await _beat(groups, "g1", "m", 1)
        assert refused.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        await _beat(groups, "g2", "n", 0, ["a"])
        with pytest.raises(GroupError) as full:  # group.share.max.size, 2 here
            await _beat(groups, "g2", "o", 0, ["a"])
        assert full.value.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
        with pytest.raises(GroupError) as classic:
            await _beat(groups, "classic", "m", 0, ["a"])
        assert classic.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        groups.stop()

    asyncio.run(run())


def test_a_member_id_too_long_for_the_records_is_refused_before_the_group_changes():
    """A share member record's key holds the member id with an int16 length; a longer id is UNKNOWN_SERVER_ERROR
    (Kafka fails that write) and joins nothing."""
    async def run() -> None:
        groups = ShareGroups(2, lambda name: (T1, 3) if name == "a" else None, other_kind=lambda g: False,
                             append=_no_log, spawn=asyncio.get_running_loop().create_task)
        with pytest.raises(GroupError) as refused:
            await _beat(groups, "g", "m" * 40_000, 0, ["a"])
        assert refused.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert "g" not in groups.groups or not groups.groups["g"].members
    asyncio.run(run())


def test_a_member_the_group_does_not_know_is_checked_against_the_group_itself():
    """member_group.check_joining reads the group's id and size from the group it is given, and names the
    group's kind by its GROUP_TYPE in Kafka's message."""
    group = ShareGroup("g", members={"a": ShareMember("a", "client", "host")})
    check_joining(group, GROUP_TYPE, "b", epoch=0, max_size=2)
    with pytest.raises(GroupError) as full:
        check_joining(group, GROUP_TYPE, "b", epoch=0, max_size=1)
    assert full.value.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert full.value.message == "The share group has reached its maximum capacity of 1 members."
    with pytest.raises(GroupError) as unknown:
        check_joining(group, GROUP_TYPE, "b", epoch=3, max_size=2)
    assert unknown.value.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert unknown.value.message == "Member b is not a member of group g."


def _derived_afresh(group: ShareGroup) -> tuple[frozenset[str], dict[uuid.UUID, frozenset[int]]]:
    """What ShareGroup keeps derived (subscribed_names, target_given), walked from its members now."""
    given: dict[uuid.UUID, set[int]] = {}
    for assignment in group.target.values():
        for topic_id, parts in assignment.items():
            given.setdefault(topic_id, set()).update(parts)
    return (frozenset(name for m in group.members.values() for name in m.subscribed),
            {topic_id: frozenset(parts) for topic_id, parts in given.items()})


def _kept_right(group: ShareGroup) -> bool:
    return (group.subscribed_names(), group.target_given()) == _derived_afresh(group)


def test_each_change_of_members_subscriptions_or_target_keeps_the_derived_views_right():
    """ShareGroup's derived views are dropped by the methods that change what they derive from, so that
    the caller need not: after each change, derived once before it, they equal a fresh walk."""
    group = ShareGroup("g")
    a, b = ShareMember("a", "c", "h"), ShareMember("b", "c", "h")
    assert group.join(a) and group.subscribe(a, ["x"]) and _kept_right(group)
    group.set_target({"a": {T1: {0, 1}}})
    assert _kept_right(group)
    assert group.join(b) and _kept_right(group)  # a new member's subscription counts at once
    assert group.subscribe(b, ["y"]) and _kept_right(group)
    group.set_target({"a": {T1: {0}}, "b": {T2: {0}}})
    assert _kept_right(group)
    assert group.subscribe(a, ["x", "z"]) and _kept_right(group)
    group.remove("b")  # its subscription and its target go
    assert _kept_right(group) and group.subscribed_names() == {"x", "z"} and group.target_given() == {T1: {0}}
    assert not group.join(a) and not group.subscribe(a, ["x", "z"])  # a heartbeat changing nothing
    assert group.join(b) and group.subscribed_names() == {"x", "y", "z"}  # re-joined with its subscription


def test_heartbeats_and_an_undone_write_keep_the_derived_views_right():
    """Through ShareGroups: joins, a subscription changed, a member leaving, and a heartbeat whose write
    failed (its change undone with the group's fields)."""
    failing = False

    async def append(group_id: str, entries) -> int:
        if failing:
            raise GroupError(ErrorCode.NOT_COORDINATOR, "not written")
        return 0

    async def run() -> None:
        nonlocal failing
        groups = ShareGroups(5, {"a": (T1, 3), "b": (T2, 2)}.get, other_kind=lambda g: False,
                             append=append, spawn=asyncio.get_running_loop().create_task)
        await _beat(groups, "g", "m1", 0, ["a"])
        group = groups.groups["g"]
        assert _kept_right(group) and group.subscribed_names() == {"a"}
        await _beat(groups, "g", "m2", 0, ["b"])
        assert _kept_right(group) and group.subscribed_names() == {"a", "b"} and set(group.target_given()) == {T1, T2}
        await _beat(groups, "g", "m1", group.members["m1"].epoch, ["a", "b"])
        assert _kept_right(group)
        failing = True
        with pytest.raises(GroupError):
            await _beat(groups, "g", "m1", group.members["m1"].epoch, ["b"])
        assert _kept_right(group) and group.members["m1"].subscribed == ["a", "b"]
        failing = False
        await _beat(groups, "g", "m1", group.members["m1"].epoch, ["a"])
        assert _kept_right(group) and group.target_given() == {T1: {0, 1, 2}, T2: {0, 1}}  # m2 holds b's
        await _beat(groups, "g", "m2", -1)  # leaves
        assert _kept_right(group) and group.subscribed_names() == {"a"} and group.target_given() == {T1: {0, 1, 2}}
        groups.stop()

    asyncio.run(run())
