"""KIP-848 consumer groups without a broker (broker/group/consumer_groups.py, consumer_group.py,
consumer_assignors.py): the assignors' balance and stickiness, reconciliation (a partition changes owner
only after its old owner revoked it), epochs and fencing, static members, regex checks, the heartbeat's
request checks with Kafka's messages, and the classic-group conversion."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.group.consumer_assignors import assign
from broker.group.consumer_group import ClassicMeta, MemberState
from broker.group.consumer_groups import ConsumerGroups, ConsumerHeartbeat, matching
from broker.group.consumer_type_changes import ClassicIds
from broker.group.group import GroupError
from broker.group.requests import MemberCheck
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode as E

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TIMEOUTS = MemberTimeouts(45000, 5000, 0)


async def _append(group_id, entries) -> int:  # no log: these tests look at the groups in memory
    return 0


def _spawn(coro):
    return asyncio.get_running_loop().create_task(coro)


@pytest.mark.parametrize("name", ["uniform", "range"])
@pytest.mark.parametrize("members", range(1, 6))
@pytest.mark.parametrize("partitions", range(0, 7))
def test_every_partition_has_one_owner_and_members_are_balanced(name, members, partitions):
    topics = {"a": (T1, partitions)}
    ids = {f"m{i}": ["a"] for i in range(members)}
    result = assign(name, ids, topics, {})
    owned = [p for a in result.values() for p in a.get(T1, set())]
    assert sorted(owned) == list(range(partitions))
    counts = [len(a.get(T1, set())) for a in result.values()]
    assert max(counts) - min(counts) <= 1
    if name == "uniform":  # one more member: the others keep all they can
        grown = assign(name, {**ids, "new": ["a"]}, topics, result)
        for m in ids:
            assert grown[m].get(T1, set()) <= result[m].get(T1, set()) or len(grown[m].get(T1, set())) > len(
                result[m].get(T1, set()))


def test_range_gives_contiguous_ranges_by_member_id():
    result = assign("range", {"b": ["a"], "a": ["a"]}, {"a": (T1, 5)}, {})
    assert result == {"a": {T1: {0, 1, 2}}, "b": {T1: {3, 4}}}


def test_members_get_only_what_they_subscribe_to():
    result = assign("uniform", {"x": ["a"], "y": ["b"], "z": ["a", "b"]}, {"a": (T1, 2), "b": (T2, 2)}, {})
    assert set(result["x"]) <= {T1} and set(result["y"]) <= {T2}
    assert sorted((t, p) for a in result.values() for t, ps in a.items() for p in ps) == [
        (T1, 0), (T1, 1), (T2, 0), (T2, 1)]


def _groups(topics: dict, classic: dict | None = None, **kw) -> ConsumerGroups:
    classic = {} if classic is None else classic
    now = topics if callable(topics) else (lambda: topics)
    return ConsumerGroups(kw.get("max_size", 100), ["uniform", "range"], now,
                          ClassicIds(classic.__contains__, lambda g: classic[g], classic.pop),
                          is_share=lambda g: g == "share", append=_append, spawn=_spawn)


def _hb(member: str, epoch: int, owned=None, group: str = "g", **kw) -> ConsumerHeartbeat:
    fields = dict(group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                  rebalance_timeout_ms=kw.pop("rebalance", 30000 if epoch == 0 else -1),
                  subscribed=["a"] if epoch == 0 else None, regex=None, server_assignor=None,
                  owned=owned if owned is not None or epoch != 0 else {}, client_id="c", client_host="/h")
    fields.update(kw)
    return ConsumerHeartbeat(**fields)


def _refused(groups: ConsumerGroups, request: ConsumerHeartbeat) -> tuple[E, str]:
    with pytest.raises(GroupError) as caught:
        groups.heartbeat(request, TIMEOUTS)
    return caught.value.error_code, caught.value.message


def test_a_partition_moves_only_after_its_owner_revoked_it():
    async def run():
        groups = _groups({"a": (T1, 4)})
        first = groups.heartbeat(_hb("m1", 0), TIMEOUTS)
        assert (first.member_epoch, first.assignment) == (2, {T1: {0, 1, 2, 3}})  # Kafka: a new group starts at 1
        second = groups.heartbeat(_hb("m2", 0), TIMEOUTS)
        assert second.member_epoch == 3 and second.assignment == {}  # its partitions are still m1's
        group = groups.groups["g"]
        assert group.state.value == "Reconciling"
        revoking = groups.heartbeat(_hb("m1", 2, owned={T1: {0, 1, 2, 3}}), TIMEOUTS)
        assert revoking.member_epoch == 2 and len(revoking.assignment[T1]) == 2  # keeps its epoch until revoked
        kept = revoking.assignment[T1]
        assert group.members["m1"].state == MemberState.UNREVOKED_PARTITIONS
        assert groups.heartbeat(_hb("m2", 3, owned={}), TIMEOUTS).assignment is None  # still withheld
        done = groups.heartbeat(_hb("m1", 2, owned={T1: kept}), TIMEOUTS)
        assert done.member_epoch == 3
        taken = groups.heartbeat(_hb("m2", 3, owned={}), TIMEOUTS)
        assert taken.assignment == {T1: {0, 1, 2, 3} - kept}
        assert group.state.value == "Stable"
        groups.stop()
    asyncio.run(run())


def test_after_revoking_a_member_goes_straight_to_the_target_epoch():
    """Kafka 4.3.1's CurrentAssignmentBuilder: once a member in UNREVOKED_PARTITIONS reports its partitions
    gone it is reconciled against the latest target and takes its epoch, however many bumps came between
    (not one epoch at a time); partitions given back then count as held since that epoch."""
    async def run():
        groups = _groups({"a": (T1, 4)})
        groups.heartbeat(_hb("m1", 0), TIMEOUTS)  # epoch 2, all four
        groups.heartbeat(_hb("m2", 0), TIMEOUTS)  # epoch 3
        groups.heartbeat(_hb("m3", 0), TIMEOUTS)  # epoch 4: two bumps while m1 holds everything
        told = groups.heartbeat(_hb("m1", 2, owned={T1: {0, 1, 2, 3}}), TIMEOUTS)
        m1 = groups.groups["g"].members["m1"]
        assert told.member_epoch == 2 and m1.state == MemberState.UNREVOKED_PARTITIONS
        kept = told.assignment[T1]
        done = groups.heartbeat(_hb("m1", 2, owned={T1: set(kept)}), TIMEOUTS)
        assert (done.member_epoch, m1.state, m1.assigned) == (4, MemberState.STABLE, {T1: kept})
        assert m1.previous_epoch == 2 and m1.held_since == {(T1, p): 2 for p in kept}
        groups.stop()
    asyncio.run(run())


def test_partitions_given_back_after_a_revocation_are_held_since_the_target_epoch():
    async def run():
        groups = _groups({"a": (T1, 4)})
        groups.heartbeat(_hb("m1", 0), TIMEOUTS)  # epoch 2, all four
        groups.heartbeat(_hb("m2", 0), TIMEOUTS)  # epoch 3: m1 must give up two
        kept = groups.heartbeat(_hb("m1", 2, owned={T1: {0, 1, 2, 3}}), TIMEOUTS).assignment[T1]
        groups.heartbeat(_hb("m2", -1), TIMEOUTS)  # epoch 4: all four are m1's again
        done = groups.heartbeat(_hb("m1", 2, owned={T1: set(kept)}), TIMEOUTS)
        m1 = groups.groups["g"].members["m1"]
        assert (done.member_epoch, done.assignment) == (4, {T1: {0, 1, 2, 3}})
        assert m1.held_since == {(T1, p): 2 if p in kept else 4 for p in range(4)}
        assert _check(groups, "m1", 3, ("a", next(p for p in range(4) if p not in kept))) == E.STALE_MEMBER_EPOCH
        groups.stop()
    asyncio.run(run())


def test_a_member_told_to_revoke_forgets_its_epoch_before():
    """Kafka sets the previous epoch at every step of the reconciliation, one that keeps the epoch too: a
    heartbeat at the epoch before the revocation started is fenced, even holding no more than assigned."""
    async def run():
        groups = _groups({"a": (T1, 6)})
        groups.heartbeat(_hb("m1", 0), TIMEOUTS)  # epoch 2
        groups.heartbeat(_hb("m2", 0), TIMEOUTS)  # epoch 3
        kept = groups.heartbeat(_hb("m1", 2, owned={T1: set(range(6))}), TIMEOUTS).assignment[T1]
        assert groups.heartbeat(_hb("m1", 2, owned={T1: set(kept)}), TIMEOUTS).member_epoch == 3
        groups.heartbeat(_hb("m2", 3, owned={}), TIMEOUTS)
        assert groups.heartbeat(_hb("m1", 2, owned={T1: set(kept)}), TIMEOUTS).member_epoch == 3  # the one before
        groups.heartbeat(_hb("m3", 0), TIMEOUTS)  # epoch 4: m1 must give up one of its three
        told = groups.heartbeat(_hb("m1", 3, owned={T1: set(kept)}), TIMEOUTS)
        assert told.member_epoch == 3 and groups.groups["g"].members["m1"].previous_epoch == 3
        assert _refused(groups, _hb("m1", 2, owned=told.assignment))[0] == E.FENCED_MEMBER_EPOCH
        groups.stop()
    asyncio.run(run())


def test_a_member_revoking_that_leaves_a_topic_gives_it_up_at_that_heartbeat():
    """Kafka 4.3.1 (CurrentAssignmentBuilder's updateCurrentAssignment): a member still revoking that drops
    a topic from its subscription is told at that heartbeat to give up the topic's partitions too, at its
    epoch; they go to the others only once it has revoked all of them."""
    async def run():
        groups = _groups({"a": (T1, 2), "b": (T2, 2)})
        both = {"subscribed": ["a", "b"], "server_assignor": "range"}
        groups.heartbeat(_hb("m1", 0, **both), TIMEOUTS)  # epoch 2: all four
        groups.heartbeat(_hb("m2", 0, **both), TIMEOUTS)  # epoch 3: m1 keeps a-0 and b-0
        held = {T1: {0, 1}, T2: {0, 1}}
        assert groups.heartbeat(_hb("m1", 2, owned=held), TIMEOUTS).assignment == {T1: {0}, T2: {0}}
        m1 = groups.groups["g"].members["m1"]
        left = groups.heartbeat(_hb("m1", 2, owned=held, subscribed=["a"]), TIMEOUTS)  # epoch 4
        assert (left.member_epoch, left.assignment) == (2, {T1: {0}})
        assert (m1.state, m1.previous_epoch) == (MemberState.UNREVOKED_PARTITIONS, 2)
        assert m1.pending_revocation == {T1: {1}, T2: {0, 1}}
        assert m1.held_since == {(t, p): 2 for t in (T1, T2) for p in (0, 1)}
        m2 = groups.groups["g"].members["m2"]
        waiting = groups.heartbeat(_hb("m2", 3, owned={}), TIMEOUTS)
        assert (waiting.member_epoch, m2.state, m2.assigned) == (4, MemberState.UNRELEASED_PARTITIONS, {})
        partly = groups.heartbeat(_hb("m1", 2, owned={T1: {0}, T2: {0}}), TIMEOUTS)  # b-0 still held
        assert (partly.member_epoch, partly.assignment) == (2, None)
        done = groups.heartbeat(_hb("m1", 2, owned={T1: {0}}), TIMEOUTS)
        assert (done.member_epoch, m1.state, m1.assigned) == (4, MemberState.STABLE, {T1: {0}})
        taken = groups.heartbeat(_hb("m2", 4, owned={}), TIMEOUTS)
        assert taken.assignment == {T1: {1}, T2: {0, 1}}
        groups.stop()
    asyncio.run(run())


def test_epochs_fence_and_leaving_gives_partitions_back():
    async def run():
        groups = _groups({"a": (T1, 2)})
        groups.heartbeat(_hb("m1", 0), TIMEOUTS)
        assert _refused(groups, _hb("m1", 5))[0] == E.FENCED_MEMBER_EPOCH
        assert _refused(groups, _hb("nobody", 2))[0] == E.UNKNOWN_MEMBER_ID
        # a group this coordinator does not know (restarted, failed over): the member rejoins
        assert _refused(groups, _hb("m1", 1, group="other"))[0] == E.UNKNOWN_MEMBER_ID
        assert _refused(groups, _hb("m1", -1, group="other"))[0] == E.GROUP_ID_NOT_FOUND
        groups.heartbeat(_hb("m2", 0), TIMEOUTS)
        left = groups.heartbeat(_hb("m1", -1), TIMEOUTS)
        assert (left.member_epoch, left.assignment) == (-1, None)
        again = groups.heartbeat(_hb("m2", 3, owned={}), TIMEOUTS)
        assert again.assignment == {T1: {0, 1}} and again.member_epoch == 4
        assert groups.delete("g") == E.NON_EMPTY_GROUP
        groups.heartbeat(_hb("m2", -1), TIMEOUTS)
        assert groups.groups["g"].state.value == "Empty" and groups.delete("g") == E.NONE
    asyncio.run(run())


def test_static_member_keeps_its_partitions_across_a_restart():
    async def run():
        groups = _groups({"a": (T1, 2)})
        joined = groups.heartbeat(_hb("m1", 0, instance_id="i"), TIMEOUTS)
        code, message = _refused(groups, _hb("m2", 0, instance_id="i"))
        assert code == E.UNRELEASED_INSTANCE_ID and "owned by m1" in message
        assert groups.heartbeat(_hb("m1", -2, instance_id="i"), TIMEOUTS).member_epoch == -2
        back = groups.heartbeat(_hb("m3", 0, instance_id="i"), TIMEOUTS)
        assert back.assignment == joined.assignment and set(groups.groups["g"].members) == {"m3"}
        assert groups.groups["g"].group_epoch == 2  # no rebalance
        assert _refused(groups, _hb("m9", -2, instance_id="i"))[0] == E.FENCED_INSTANCE_ID
        assert _refused(groups, _hb("m9", -2, instance_id="x"))[0] == E.UNKNOWN_MEMBER_ID
        groups.stop()
    asyncio.run(run())


def test_topics_created_and_grown_change_the_assignment_and_regex_subscriptions():
    async def run():
        now = [{"a": (T1, 1)}]
        groups = _groups(lambda: now[0])
        joined = groups.heartbeat(_hb("m1", 0, subscribed=None, regex="a|b.*"), TIMEOUTS)
        assert joined.assignment == {T1: {0}}
        # A change of the topics is a new TopicsNow answer (the broker's is kept while none changes).
        now[0] = {"a": (T1, 2), "bee": (T2, 1), "__consumer_offsets": (uuid.UUID(int=3), 50)}
        grown = groups.heartbeat(_hb("m1", 2, owned={T1: {0}}), TIMEOUTS)
        assert grown.member_epoch == 3 and grown.assignment == {T1: {0, 1}, T2: {0}}
        groups.stop()
    asyncio.run(run())
    assert matching("a.*", ["ab", "xab", "__consumer_offsets", "a"]) == ["a", "ab"]
    assert matching("__consumer_offsets", ["__consumer_offsets", "x"]) == ["__consumer_offsets"]
    # RE2, as Kafka's RE2J: linear time, where a backtracking engine would take ages on this
    assert matching("(a+)+$", ["a" * 100_000 + "b"]) == []


@pytest.mark.parametrize(("request_fields", "code", "message"), [
    ({"member_id": ""}, E.INVALID_REQUEST, "MemberId can't be empty."),
    ({"group_id": ""}, E.INVALID_REQUEST, "GroupId can't be empty."),
    ({"instance_id": ""}, E.INVALID_REQUEST, "InstanceId can't be empty."),
    ({"rack_id": ""}, E.INVALID_REQUEST, "RackId can't be empty."),
    ({"rebalance": -1}, E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."),
    ({"owned": {T1: {0}}}, E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
    ({"subscribed": None}, E.INVALID_REQUEST,
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    ({"server_assignor": "sticky"}, E.UNSUPPORTED_ASSIGNOR,
     "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
    ({"regex": "(?=a)b"}, E.INVALID_REGULAR_EXPRESSION, None),
    ({"regex": "a\\Z"}, E.INVALID_REGULAR_EXPRESSION, None),
    ({"regex": "(a"}, E.INVALID_REGULAR_EXPRESSION, None),
])
def test_bad_requests_get_kafkas_errors(request_fields, code, message):
    async def run():
        groups = _groups({"a": (T1, 1)})
        got = _refused(groups, _hb("m1", 0, **request_fields))
        assert got[0] == code
        if message is not None:
            assert got[1] == message
    asyncio.run(run())


def test_other_epochs_are_checked():
    async def run():
        groups = _groups({})
        assert _refused(groups, _hb("m", -3))[1] == "MemberEpoch is invalid."
        assert _refused(groups, _hb("m", -2))[1] == "InstanceId can't be null."
    asyncio.run(run())


def test_group_types_and_size():
    async def run():
        classic = {"empty-classic": True, "busy-classic": False}
        groups = _groups({"a": (T1, 1)}, classic, max_size=1)
        assert _refused(groups, _hb("m", 0, group="share"))[0] == E.GROUP_ID_NOT_FOUND
        assert _refused(groups, _hb("m", 0, group="busy-classic"))[0] == E.GROUP_ID_NOT_FOUND
        # offsets only (a restarted coordinator): the member is unknown and rejoins
        assert _refused(groups, _hb("m", 5, group="empty-classic"))[0] == E.UNKNOWN_MEMBER_ID
        groups.heartbeat(_hb("m", 0, group="empty-classic"), TIMEOUTS)
        assert "empty-classic" not in classic and "empty-classic" in groups.groups
        code, message = _refused(groups, _hb("m2", 0, group="empty-classic"))
        assert code == E.GROUP_MAX_SIZE_REACHED
        assert message == "The consumer group has reached its maximum capacity of 1 members."
        groups.stop()
    asyncio.run(run())


def _check(groups: ConsumerGroups, member: str, epoch: int, *partitions: tuple[str, int], **kw) -> E:
    """The error a commit (or fetch) of those partitions gets; NONE when taken."""
    try:
        groups.check_commit("g", MemberCheck(member, epoch, partitions=partitions, **kw))
    except GroupError as exc:
        return exc.error_code
    return E.NONE


def test_offset_commits_need_the_members_epoch():
    async def run():
        groups = _groups({"a": (T1, 1)})
        groups.heartbeat(_hb("m", 0), TIMEOUTS)
        assert _check(groups, "m", 2, ("a", 0)) == E.NONE
        assert _check(groups, "m", 3, ("a", 0)) == E.STALE_MEMBER_EPOCH  # newer than the member's
        assert _check(groups, "m", 1, ("a", 0)) == E.STALE_MEMBER_EPOCH  # older than the partition's
        assert _check(groups, "m", 2, ("a", 0), version=8) == E.UNSUPPORTED_VERSION
        assert _check(groups, "x", 2) == E.UNKNOWN_MEMBER_ID
        assert _check(groups, "", -1) == E.UNKNOWN_MEMBER_ID
        assert _check(groups, "", -1, fetch=True) == E.NONE
        # a producer committing without membership is taken; with a stale epoch ILLEGAL_GENERATION
        assert _check(groups, "", -1, ("a", 0), transactional=True) == E.NONE
        assert _check(groups, "", -1, ("a", 0), transactional=True, instance_id="i") == E.UNKNOWN_MEMBER_ID
        assert _check(groups, "m", 1, ("a", 0), transactional=True) == E.ILLEGAL_GENERATION
        groups.stop()
    asyncio.run(run())


def test_a_commit_at_an_older_epoch_is_taken_for_partitions_held_since():
    """KIP-1251 (Kafka 4.3.1): after a rebalance moved m1's epoch, a commit at its old epoch is taken for
    the partitions it kept, refused for one it was given at the new epoch or does not hold."""
    async def run():
        groups = _groups({"a": (T1, 4)})
        assert groups.heartbeat(_hb("m1", 0), TIMEOUTS).member_epoch == 2  # all 4 partitions, since 2
        groups.heartbeat(_hb("m2", 0), TIMEOUTS)  # epoch 3: m1 must give up two partitions
        groups.heartbeat(_hb("m1", 2, owned={T1: {0, 1, 2, 3}}), TIMEOUTS)
        m1 = groups.groups["g"].members["m1"]
        revoking = sorted(p for parts in m1.pending_revocation.values() for p in parts)
        kept = sorted(p for parts in m1.assigned.values() for p in parts)
        assert len(revoking) == 2 and m1.epoch == 2
        # still at epoch 2 while revoking: a partition being revoked is still held
        assert _check(groups, "m1", 2, ("a", revoking[0])) == E.NONE
        groups.heartbeat(_hb("m1", 2, owned={T1: set(kept)}), TIMEOUTS)
        assert m1.epoch == 3 and not m1.pending_revocation
        assert _check(groups, "m1", 2, *[("a", p) for p in kept]) == E.NONE  # held since 2
        assert _check(groups, "m1", 2, ("a", kept[0]), ("a", revoking[0])) == E.STALE_MEMBER_EPOCH  # gone
        assert _check(groups, "m1", 2, ("a", kept[0]), ("b", 0)) == E.STALE_MEMBER_EPOCH  # never held
        assert _check(groups, "m1", 2, ("a", kept[0]), fetch=True) == E.STALE_MEMBER_EPOCH  # a fetch: exact
        assert _check(groups, "m1", 1, ("a", kept[0])) == E.STALE_MEMBER_EPOCH  # older than held
        # m2 was given m1's old partitions at epoch 3 (after joining at 3 with nothing): not before
        groups.heartbeat(_hb("m2", 3, owned={}), TIMEOUTS)
        m2 = groups.groups["g"].members["m2"]
        assert sorted(p for parts in m2.assigned.values() for p in parts) == revoking
        assert m2.held_since == {(T1, p): 3 for p in revoking}
        groups.stop()
    asyncio.run(run())


def test_a_classic_member_commits_at_an_older_generation_for_partitions_held_since():
    async def run():
        groups = _groups({"a": (T1, 2)})
        groups.heartbeat(_hb("m", 0), TIMEOUTS)
        member = groups.groups["g"].members["m"]
        member.classic = ClassicMeta(10000, [("range", b"")])
        member.held_since = {(T1, 0): 1, (T1, 1): 2}
        member.epoch = 3
        assert _check(groups, "m", 1, ("a", 0)) == E.NONE
        assert _check(groups, "m", 1, ("a", 0), ("a", 1)) == E.ILLEGAL_GENERATION
        assert _check(groups, "m", 4, ("a", 0)) == E.ILLEGAL_GENERATION
        assert _check(groups, "m", 2, ("a", 1), version=2) == E.NONE  # any OffsetCommit version
        groups.stop()
    asyncio.run(run())


def test_a_static_member_leaving_for_now_holds_its_partitions_since_epoch_0():
    async def run():
        groups = _groups({"a": (T1, 2)})
        groups.heartbeat(_hb("m", 0, instance_id="i"), TIMEOUTS)
        groups.heartbeat(_hb("m", -2, instance_id="i"), TIMEOUTS)
        assert groups.groups["g"].members["m"].held_since == {(T1, 0): 0, (T1, 1): 0}
        groups.heartbeat(_hb("n", 0, instance_id="i"), TIMEOUTS)  # takes over what m held, at epoch 2
        n = groups.groups["g"].members["n"]
        assert n.epoch == 2 and n.held_since == {(T1, 0): 0, (T1, 1): 0}
        assert _check(groups, "n", 0, ("a", 0), ("a", 1)) == E.NONE
        groups.stop()
    asyncio.run(run())
