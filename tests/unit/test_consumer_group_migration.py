"""Online migration between the classic protocol and KIP-848's inside a whole (one-node) broker's coordinator
(broker/group/consumer_migration.py, consumer_classic.py): the upgrade of a classic group with members, its
classic members served inside the consumer group, the downgrade when the last KIP-848 member leaves, what
group.consumer.migration.policy allows, offset commits of classic members, and a restart keeping a mixed
group (ClassicMemberMetadata in the member records)."""

from __future__ import annotations

import asyncio
import struct

import pytest

from broker.app import Broker
from broker.cluster.store import StoreError
from broker.group import JoinRequest, OffsetCommit
from broker.group import consumer_protocol as cp
from broker.group.consumer_group import MemberState
from broker.group.consumer_groups import ConsumerHeartbeat
from broker.group.group import GroupError, GroupState
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode
from protocol.messages import ConsumerProtocolSubscription
from tests.unit.whole_broker import one_node_config, whole_broker

TIMEOUTS = MemberTimeouts(45_000, 5_000, 0)


def _config(tmp_path, policy: str):
    # Targets at once (no consumer.assignment.interval.ms): these tests follow each step's new target.
    return one_node_config(tmp_path, {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
                                      "group.consumer.migration.policy": policy,
                                      "group.consumer.assignment.interval.ms": "0"})


@pytest.fixture
async def broker(tmp_path, request):
    async with whole_broker(_config(tmp_path, getattr(request, "param", "bidirectional")), {"t": 2}) as b:
        yield b


def _subscription(topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    value = ConsumerProtocolSubscription(topics=topics, user_data=None, owned_partitions=[
        ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=p) for t, p in (owned or {}).items()])
    return struct.pack(">h", 1) + ConsumerProtocolSubscription[1].encode(value)


def _join_request(member_id: str = "", version: int = 3, owned: dict[str, list[int]] | None = None,
                  session_ms: int = 30_000) -> JoinRequest:
    return JoinRequest(group_id="g", member_id=member_id, group_instance_id=None, session_timeout_ms=session_ms,
                       rebalance_timeout_ms=30_000, protocol_type="consumer",
                       protocols=[("range", _subscription(["t"], owned))], client_id="classic",
                       client_host="/127.0.0.1", version=version)


def _heartbeat(member: str, epoch: int, owned=None) -> ConsumerHeartbeat:
    return ConsumerHeartbeat("g", member, epoch, None, None, 30_000 if epoch == 0 else -1,
                             ["t"] if epoch == 0 else None, None, None, {} if owned is None else owned, "kip848",
                             "/127.0.0.1")


async def _classic_group(groups) -> tuple[str, str, int]:
    """Two classic members holding t-0 and t-1: (leader id, follower id, generation)."""
    first, second = await asyncio.gather(groups.join_group(_join_request()), groups.join_group(_join_request()))
    leader, follower = (first, second) if first.members else (second, first)
    assignment = {leader.member_id: cp.encode_assignment(1, {"t": {0}}),
                  follower.member_id: cp.encode_assignment(1, {"t": {1}})}
    synced = await asyncio.gather(
        groups.sync_group("g", leader.generation_id, leader.member_id, None, None, None, list(assignment.items())),
        groups.sync_group("g", follower.generation_id, follower.member_id, None, None, None, []))
    assert [s.error for s in synced] == [ErrorCode.NONE, ErrorCode.NONE]
    return leader.member_id, follower.member_id, leader.generation_id


def _expiry_seen(groups) -> asyncio.Event:
    """Set once a member timer armed from now on has fired (the coordinator's expire has run)."""
    fired = asyncio.Event()
    expire = groups.consumer.expire

    def expiring(*args) -> None:
        expire(*args)
        fired.set()
    groups.consumer.expire = expiring
    return fired


async def _catch_up(groups, member_id: str, epoch: int) -> tuple[int, dict[str, set[int]]]:
    """A classic member rejoins and syncs until its heartbeat is quiet: (its epoch, what it holds)."""
    for _ in range(4):
        if groups.heartbeat("g", epoch, member_id, None) == ErrorCode.NONE:
            break
        joined = await groups.join_group(_join_request(member_id))  # eager: it gave everything up
        assert joined.error == ErrorCode.NONE and joined.protocol_name == "range" and not joined.members
        epoch = joined.generation_id
        synced = await groups.sync_group("g", epoch, member_id, None, "consumer", "range", [])
        assert synced.error == ErrorCode.NONE
        held = cp.decode_assignment(synced.assignment)[0]
    return epoch, held


async def test_upgrade_serves_classic_members_then_downgrades_when_the_last_consumer_member_leaves(broker):
    groups = broker.groups
    leader, follower, generation = await _classic_group(groups)
    answer = groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
    await groups.consumer.persist("g", "new")
    group = groups.consumer.groups["g"]
    assert "g" not in groups.groups and answer.member_epoch == generation + 1
    t = broker._consumer_topics()["t"][0]
    assert {m: (group.members[m].epoch, group.members[m].assigned) for m in (leader, follower)} == {
        leader: (generation, {t: {0}}), follower: (generation, {t: {1}})}
    assert group.members[leader].classic.session_timeout_ms == 30_000
    assert answer.assignment == {}  # both partitions are still held by classic members
    # The classic members are told to rejoin; one gives a partition up to the new member.
    held = {}
    for member_id in (leader, follower):
        _, held[member_id] = await _catch_up(groups, member_id, generation)
    taken = groups.consumer.heartbeat(_heartbeat("new", answer.member_epoch), TIMEOUTS)
    owners = [p for parts in held.values() for p in parts.get("t", ())] + sorted(
        group.members["new"].assigned.get(t, ()))
    assert sorted(owners) == [0, 1] and taken.member_epoch == group.group_epoch
    # A classic member commits with its epoch as generation, at any OffsetCommit version.
    epoch = group.members[leader].epoch
    commit = [OffsetCommit("t", 0, 7, -1, None)]
    assert await groups.offsets.commit("g", epoch, leader, None, -1, commit, 2) == [ErrorCode.NONE]
    with pytest.raises(GroupError) as refused:
        await groups.offsets.commit("g", epoch + 5, leader, None, -1, commit, 2)
    assert refused.value.error_code == ErrorCode.ILLEGAL_GENERATION
    # The last KIP-848 member leaves: a classic group again, at the group epoch, rebalancing.
    groups.consumer.heartbeat(_heartbeat("new", -1), TIMEOUTS)
    await groups.consumer.persist("g")
    classic = groups.groups["g"]
    assert "g" not in groups.consumer.groups and set(classic.members) == {leader, follower}
    assert classic.is_in(GroupState.PREPARING_REBALANCE) and classic.protocol_name == "range"
    assert groups.heartbeat("g", classic.generation_id, leader, None) == ErrorCode.REBALANCE_IN_PROGRESS


async def test_a_classic_heartbeat_compares_the_targets_epoch_not_the_groups(broker):
    """Kafka 4.3.1 tells a classic member to rejoin when the target assignment's epoch passed its own: a
    member leaving moves the group epoch only, the target moves at the next join or KIP-848 heartbeat."""
    groups = broker.groups
    leader, follower, generation = await _classic_group(groups)
    answer = groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
    epochs = {}
    for member_id in (leader, follower):
        epochs[member_id], _ = await _catch_up(groups, member_id, generation)
    groups.consumer.heartbeat(_heartbeat("new", answer.member_epoch), TIMEOUTS)
    group = groups.consumer.groups["g"]
    assert epochs[leader] == group.assignment_epoch == group.group_epoch
    assert await groups.leave_group("g", [(follower, None)]) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert group.group_epoch == group.assignment_epoch + 1  # no target yet
    assert groups.heartbeat("g", epochs[leader], leader, None) == ErrorCode.NONE
    groups.consumer.heartbeat(_heartbeat("new", group.members["new"].epoch), TIMEOUTS)  # computes the target
    assert group.assignment_epoch == group.group_epoch
    assert groups.heartbeat("g", epochs[leader], leader, None) == ErrorCode.REBALANCE_IN_PROGRESS


async def test_a_restart_keeps_a_mixed_group_and_a_downgraded_one(tmp_path):
    first = Broker(_config(tmp_path, "bidirectional"))
    await first.start()
    try:
        await first.topics.create("t", 2, 1)
        leader, follower, generation = await _classic_group(first.groups)
        first.groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
        await first.groups.consumer.persist("g", "new")
    finally:
        await first.stop()
    again = Broker(_config(tmp_path, "bidirectional"))
    await again.start()
    try:
        group = again.groups.consumer.groups["g"]
        assert "g" not in again.groups.groups and set(group.members) == {leader, follower, "new"}
        assert group.members[leader].classic.protocols[0][0] == "range"
        assert group.members["new"].classic is None
        # A classic member carries on inside the loaded group: told to rejoin as before the restart.
        assert again.groups.heartbeat("g", generation, leader, None) == ErrorCode.REBALANCE_IN_PROGRESS
        again.groups.consumer.heartbeat(_heartbeat("new", -1), TIMEOUTS)
        await again.groups.consumer.persist("g")
    finally:
        await again.stop()
    third = Broker(_config(tmp_path, "bidirectional"))
    await third.start()
    try:
        assert "g" not in third.groups.consumer.groups
        assert set(third.groups.groups["g"].members) == {leader, follower}
    finally:
        await third.stop()


async def test_classic_members_join_a_consumer_group_through_member_id_required(broker):
    groups = broker.groups
    first = groups.consumer.heartbeat(_heartbeat("kip848", 0), TIMEOUTS)
    asked = await groups.join_group(_join_request(version=5))
    assert asked.error == ErrorCode.MEMBER_ID_REQUIRED and asked.member_id
    joined = await groups.join_group(_join_request(asked.member_id, version=5))
    group = groups.consumer.groups["g"]
    assert joined.error == ErrorCode.NONE and joined.leader == "" and joined.generation_id == group.group_epoch
    assert group.members[asked.member_id].classic is not None
    wrong = await groups.join_group(JoinRequest("g", asked.member_id, None, 30_000, 30_000, "connect",
                                                [("range", b"")], "classic", "/127.0.0.1", 5))
    assert wrong.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # The KIP-848 member gives a partition up, then the classic member gets it at a later rejoin.
    revoking = groups.consumer.heartbeat(_heartbeat("kip848", first.member_epoch, owned=first.assignment),
                                         TIMEOUTS)
    assert len(revoking.assignment[broker._consumer_topics()["t"][0]]) == 1
    groups.consumer.heartbeat(_heartbeat("kip848", revoking.member_epoch, owned=revoking.assignment), TIMEOUTS)
    _, held = await _catch_up(groups, asked.member_id, joined.generation_id)
    assert len(held["t"]) == 1
    # LeaveGroup of the classic member: the group stays a consumer group (a KIP-848 member is left).
    assert await groups.leave_group("g", [(asked.member_id, None)]) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert set(group.members) == {"kip848"} and "g" in groups.consumer.groups


@pytest.mark.parametrize("broker", ["downgrade", "disabled"], indirect=True)
async def test_no_upgrade_unless_the_policy_allows_it(broker):
    groups = broker.groups
    await _classic_group(groups)
    with pytest.raises(GroupError) as refused:
        groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
    assert refused.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert refused.value.message == ("Cannot upgrade classic group g to consumer group because online upgrade is "
                                     "disabled.")
    assert "g" in groups.groups and "g" not in groups.consumer.groups


@pytest.mark.parametrize("broker", ["disabled"], indirect=True)
async def test_no_classic_member_joins_a_consumer_group_when_migration_is_disabled(broker):
    groups = broker.groups
    groups.consumer.heartbeat(_heartbeat("kip848", 0), TIMEOUTS)
    refused = await groups.join_group(_join_request())
    assert refused.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("broker", ["upgrade"], indirect=True)
async def test_no_downgrade_unless_the_policy_allows_it(broker):
    """Under "upgrade" the group stays a consumer group of classic members once the KIP-848 one leaves:
    they are told to rejoin and share the partitions."""
    groups = broker.groups
    leader, follower, generation = await _classic_group(groups)
    groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
    groups.consumer.heartbeat(_heartbeat("new", -1), TIMEOUTS)
    group = groups.consumer.groups["g"]
    assert "g" not in groups.groups and set(group.members) == {leader, follower}
    held = {}
    for member_id in (leader, follower):
        _, held[member_id] = await _catch_up(groups, member_id, generation)
    assert sorted(p for h in held.values() for p in h.get("t", ())) == [0, 1]


async def test_classic_members_that_do_not_rejoin_are_fenced(broker):
    """Told to rejoin, a classic member has its rebalance timeout to do so; when it is fenced and only classic
    members remain, the group turns classic."""
    groups = broker.groups
    leader, follower, generation = await _classic_group(groups)
    groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
    group = groups.consumer.groups["g"]
    group.members[leader].rebalance_timeout_ms = 20  # the join timeout, short for the test
    assert groups.heartbeat("g", generation, leader, None) == ErrorCode.REBALANCE_IN_PROGRESS
    assert set(group.members[leader].classic_timers) == {"join"}
    await asyncio.wait_for(_expiry_seen(groups).wait(), 10)
    assert leader not in group.members and follower in group.members
    groups.consumer.heartbeat(_heartbeat("new", -1), TIMEOUTS)
    assert set(groups.groups["g"].members) == {follower}


async def _two_classic_and_a_static_member(groups):
    """A consumer group upgraded from two classic members, with a KIP-848 static member (instance
    "instance", id "new") joined and caught up: (leader id, follower id, the consumer group)."""
    leader, follower, generation = await _classic_group(groups)
    static = ConsumerHeartbeat("g", "new", 0, "instance", None, 30_000, ["t"], None, None, {}, "kip848",
                               "/127.0.0.1")
    groups.consumer.heartbeat(static, TIMEOUTS)
    for member_id in (leader, follower):
        await _catch_up(groups, member_id, generation)
    group = groups.consumer.groups["g"]
    groups.consumer.heartbeat(ConsumerHeartbeat("g", "new", group.members["new"].epoch, None, None, -1, None, None,
                                                None, {}, "kip848", "/127.0.0.1"), TIMEOUTS)
    return leader, follower, group


async def test_a_classic_instance_replacing_the_last_consumer_member_downgrades_the_group(broker):
    """Kafka's validateOnlineDowngradeWithReplacedMember: the static KIP-848 member's instance comes back
    classic (same subscription): the group turns classic with no rebalance, the new member id holding what
    the instance held."""
    groups = broker.groups
    leader, follower, group = await _two_classic_and_a_static_member(groups)
    target = group.target["new"]
    request = _join_request()
    request.group_instance_id = "instance"
    joined = await groups.join_group(request)
    assert joined.error == ErrorCode.NONE and "g" not in groups.consumer.groups
    classic = groups.groups["g"]
    assert classic.is_in(GroupState.STABLE) and set(classic.members) == {leader, follower, joined.member_id}
    expected = cp.by_name(target, broker._consumer_topics())
    assert cp.decode_assignment(classic.members[joined.member_id].assignment)[0] == expected
    synced = await groups.sync_group("g", joined.generation_id, joined.member_id, "instance", None, None, [])
    assert synced.error == ErrorCode.NONE


async def test_a_classic_instance_replacing_the_last_consumer_member_under_a_stale_target_rebalances(broker):
    """The same replacement while the target is behind the group epoch (a member left, or a target waiting
    for the assignment interval): Kafka's downgrade rebalances the classic group, since the assignments it
    would keep are stale."""
    groups = broker.groups
    leader, follower, group = await _two_classic_and_a_static_member(groups)
    for epoch in (0, -1):  # another KIP-848 member comes and goes: the group epoch moves past the target's
        groups.consumer.heartbeat(ConsumerHeartbeat("g", "passing", epoch, None, None, 30_000 if epoch == 0 else -1,
                                                    ["t"] if epoch == 0 else None, None, None, {}, "kip848",
                                                    "/127.0.0.1"), TIMEOUTS)
    assert group.assignment_epoch < group.group_epoch
    await _instance_comes_back_classic_and_the_group_rebalances(groups)


async def test_a_classic_instance_replacing_the_last_consumer_member_after_a_topic_grew_rebalances(broker):
    """The same replacement after t grew to 3 partitions, which no heartbeat has seen yet: as Kafka's
    classicGroupJoinToConsumerGroup, the join looks at the topics first, so the group epoch moves past the
    target and the downgraded group rebalances (t-2 is not left unassigned)."""
    groups = broker.groups
    _, _, group = await _two_classic_and_a_static_member(groups)
    assert group.assignment_epoch == group.group_epoch
    await broker.topics.add_partitions("t", 3)
    await _instance_comes_back_classic_and_the_group_rebalances(groups)


async def _instance_comes_back_classic_and_the_group_rebalances(groups) -> None:
    request = _join_request()
    request.group_instance_id = "instance"
    joined = await groups.join_group(request)
    assert joined.error == ErrorCode.NONE and "g" not in groups.consumer.groups
    assert groups.groups["g"].is_in(GroupState.PREPARING_REBALANCE)


async def test_a_classic_join_into_a_consumer_group_whose_configs_cannot_be_read(broker):
    """The join needs the group's consumer.assignment.interval.ms: unreadable, it is answered
    COORDINATOR_NOT_AVAILABLE (as a KIP-848 heartbeat is) and changes nothing."""
    groups = broker.groups
    leader, _, generation = await _classic_group(groups)
    groups.consumer.heartbeat(_heartbeat("new", 0), TIMEOUTS)
    group = groups.consumer.groups["g"]
    epochs = (group.group_epoch, group.assignment_epoch, group.members[leader].epoch)

    async def unreadable(group_id: str, protocol: str) -> MemberTimeouts:
        raise StoreError("the store is away")
    groups._member_timeouts = unreadable
    joined = await groups.join_group(_join_request(leader))
    assert (joined.error, joined.member_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, leader)
    assert (group.group_epoch, group.assignment_epoch, group.members[leader].epoch) == epochs == (
        generation + 1, generation + 1, generation)


async def test_a_classic_member_revoking_that_leaves_a_topic_gives_it_up_at_that_join(broker):
    """Kafka 4.3.1 reconciles a classic member's JoinGroup as a heartbeat: still revoking, it rejoins
    subscribed to t alone while owning all it held, and u's partitions join those it must revoke at once."""
    groups = broker.groups
    await broker.topics.create("u", 2, 1)

    def kip848(epoch: int, subscribed: list[str] | None):
        return groups.consumer.heartbeat(ConsumerHeartbeat("g", "m", epoch, None, None, 30_000 if epoch == 0 else -1,
                                                           subscribed, None, "range", {}, "kip848", "/127.0.0.1"),
                                         TIMEOUTS)

    def join(member_id: str, topics: list[str], owned: dict[str, list[int]]) -> JoinRequest:
        return JoinRequest(group_id="g", member_id=member_id, group_instance_id=None, session_timeout_ms=30_000,
                           rebalance_timeout_ms=30_000, protocol_type="consumer",
                           protocols=[("range", _subscription(topics, owned))], client_id="classic",
                           client_host="/127.0.0.1", version=3)

    kip848(0, ["none"])  # a consumer group whose KIP-848 member holds nothing
    joined = await groups.join_group(join("", ["t", "u"], {}))
    c = groups.consumer.groups["g"].members[joined.member_id]
    ids = {name: topic_id for name, (topic_id, _) in broker._consumer_topics().items()}
    assert c.assigned == {ids["t"]: {0, 1}, ids["u"]: {0, 1}}
    kip848(2, ["t", "u"])  # m takes a partition of each topic in the target: c must give them up
    every = {"t": [0, 1], "u": [0, 1]}
    await groups.join_group(join(c.member_id, ["t", "u"], every))
    assert c.state == MemberState.UNREVOKED_PARTITIONS
    kept = next(iter(c.assigned[ids["t"]]))
    assert c.assigned == {ids["t"]: {kept}, ids["u"]: {kept}}
    rejoined = await groups.join_group(join(c.member_id, ["t"], every))
    assert rejoined.generation_id == c.epoch == joined.generation_id
    assert (c.assigned, c.pending_revocation) == ({ids["t"]: {kept}}, {ids["t"]: {1 - kept}, ids["u"]: {0, 1}})


async def test_a_classic_join_with_metadata_that_is_not_the_consumer_protocol_is_kafkas_error(broker):
    groups = broker.groups
    groups.consumer.heartbeat(_heartbeat("kip848", 0), TIMEOUTS)
    request = _join_request()
    request.protocols = [("range", b"\x00\x01\xff")]
    assert (await groups.join_group(request)).error == ErrorCode.UNKNOWN_SERVER_ERROR
    assert set(groups.consumer.groups["g"].members) == {"kip848"}


async def test_no_downgrade_when_a_member_offers_no_consumer_protocol_for_the_chosen_assignor(broker):
    """Each classic member's first protocol is the consumer protocol, its second is not: whichever the classic
    group would choose, one member's metadata for it cannot be read. Kafka fails the leave (GROUP_ID_NOT_FOUND)
    and removes nobody; once a member offering only the consumer protocol is gone, the last one may leave."""
    groups = broker.groups
    groups.consumer.heartbeat(_heartbeat("kip848", 0), TIMEOUTS)
    members = []
    for first, second in (("range", "roundrobin"), ("roundrobin", "range")):
        request = _join_request(version=3)
        request.protocols = [(first, _subscription(["t"])), (second, b"")]
        members.append((await groups.join_group(request)).member_id)
    with pytest.raises(GroupError) as refused:
        groups.consumer.heartbeat(_heartbeat("kip848", -1), TIMEOUTS)
    assert refused.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert refused.value.message.startswith("Cannot downgrade the classic group g: ")
    assert "g" not in groups.groups and set(groups.consumer.groups["g"].members) == {"kip848", *members}
    # LeaveGroup (the admin path) of the KIP-848 member: refused likewise.
    assert await groups.leave_group("g", [("kip848", None)]) == (ErrorCode.GROUP_ID_NOT_FOUND, [])
    assert set(groups.consumer.groups["g"].members) == {"kip848", *members}


async def test_member_ids_too_long_for_the_records_are_refused_not_a_crash(broker):
    """A member record's key holds the member id with an int16 length: a longer id cannot be written (Kafka
    fails the write: UNKNOWN_SERVER_ERROR), whichever protocol brings it."""
    groups = broker.groups
    with pytest.raises(GroupError) as refused:
        groups.consumer.heartbeat(_heartbeat("y" * 40_000, 0), TIMEOUTS)
    assert refused.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    groups.consumer.heartbeat(_heartbeat("kip848", 0), TIMEOUTS)
    assert (await groups.join_group(_join_request("x" * 40_000))).error == ErrorCode.UNKNOWN_SERVER_ERROR
    assert set(groups.consumer.groups["g"].members) == {"kip848"}
