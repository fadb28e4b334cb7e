"""Each part of the group coordinator (broker/group) takes what it uses in its constructor, so small
fakes stand in for the rest: a dict-backed registry, a store that records what it is asked to write,
a partition that says whether it leads."""

import asyncio
from dataclasses import dataclass

import pytest

from broker.group.group import Group, GroupError, GroupState, Member
from broker.group.offsets import OffsetCommit, OffsetManager, OffsetSettings
from broker.group.offsets_store import OFFSETS_TOPIC, partition_for
from broker.group.phases import RebalancePhases
from broker.group.rebalance import GroupLimits, RebalanceProtocol
from broker.group.registry import GroupRegistry
from broker.group.requests import JoinRequest
from broker.group.sessions import SessionTimers
from broker.log import TopicPartition
from broker.replica import PartitionError
from protocol.errors import ErrorCode


class FakeRegistry:
    """The registry as the protocol, the timers and the offsets see it: every group served."""

    def __init__(self):
        self.active = True
        self.groups: dict[str, Group] = {}
        self.share_ids: set[str] = set()  # ids share groups hold (no classic group may take them)

    def is_share(self, group_id):
        return group_id in self.share_ids

    def not_served(self, group_id):
        return None

    def check_active(self):
        pass

    def check_served(self, group_id):
        pass

    def forget_if_unused(self, group):
        pass


def _member(member_id: str, session_timeout_ms: int) -> Member:
    return Member(member_id, None, "client", "/127.0.0.1", 60_000, session_timeout_ms, "consumer",
                  [("range", b"")])


async def test_the_timers_report_an_expired_session_and_keep_a_parked_member():
    registry = FakeRegistry()
    expired = []
    sessions = SessionTimers(registry, expired=lambda group, member: expired.append(member.member_id))
    group = registry.groups["g"] = Group("g", GroupState.STABLE)
    for member in (quiet := _member("quiet", 10), parked := _member("parked", 10)):
        group.add(member)
        sessions.schedule_heartbeat(group, member, member.session_timeout_ms)
    parked.join_future = asyncio.get_running_loop().create_future()  # waits in a JoinGroup
    await asyncio.sleep(0.05)  # both deadlines come first: the loop runs timers in deadline order
    assert expired == ["quiet"]
    assert quiet.heartbeat_timer is None

    gone = Group("gone", GroupState.STABLE)  # not (or no longer) in the registry: its timers do nothing
    gone.add(member := _member("m", 10))
    sessions.schedule_heartbeat(gone, member, 10)
    await asyncio.sleep(0.05)
    assert expired == ["quiet"]


async def test_the_protocol_joins_syncs_and_stores_the_assignment_through_its_fakes():
    registry = FakeRegistry()
    stored = []

    async def store_group(group_id, value):
        stored.append((group_id, value.generation, [(m.member_id, bytes(m.assignment)) for m in value.members]))
        return 0

    spawned = []

    def spawn(coro):
        task = asyncio.get_running_loop().create_task(coro)
        spawned.append(task)
        return task

    sessions = SessionTimers(registry, expired=lambda group, member: None)
    phases = RebalancePhases(0, sessions, store_group, spawn)
    protocol = RebalanceProtocol(GroupLimits(1_000, 60_000, 2**31 - 1), registry, sessions, phases, store_group, spawn)

    joined = await protocol.join_group(JoinRequest("g", "", None, 30_000, 30_000, "consumer", [("range", b"m")],
                                                   "client", "/127.0.0.1", version=3))
    assert (joined.error, joined.generation_id, joined.leader) == (ErrorCode.NONE, 1, joined.member_id)
    assert registry.groups["g"].is_in(GroupState.COMPLETING_REBALANCE)

    synced = await protocol.sync_group("g", 1, joined.member_id, None, None, None, [(joined.member_id, b"mine")])
    assert (synced.error, synced.assignment) == (ErrorCode.NONE, b"mine")
    assert stored == [("g", 1, [(joined.member_id, b"mine")])]
    assert registry.groups["g"].is_in(GroupState.STABLE)
    assert protocol.heartbeat("g", 1, joined.member_id, None) == ErrorCode.NONE
    assert protocol.heartbeat("g", 2, joined.member_id, None) == ErrorCode.ILLEGAL_GENERATION
    sessions.cancel_all(registry.groups["g"])


async def test_a_commit_by_a_member_is_a_sign_of_life_and_reaches_the_listeners():
    registry = FakeRegistry()
    group = registry.groups["g"] = Group("g", GroupState.STABLE, generation_id=3, protocol_type="consumer")
    group.add(member := _member("m", 30_000))
    written = []

    class FakeStore:
        async def commit(self, group_id, offsets):
            written.append((group_id, {tp: c.offset for tp, c in offsets.items()}))

    seen = []
    offsets = OffsetManager(OffsetSettings(metadata_max_bytes=8, retention_ms=60_000, check_interval_ms=1_000),
                            FakeStore(), registry, member_seen=lambda g, m: seen.append(m.member_id),
                            stop_timers=lambda g: None)
    told = []
    offsets.commit_listeners.append(lambda keys: told.extend(keys))
    errors = await offsets.commit("g", 3, member.member_id, None, -1,
                                  [OffsetCommit("t", 0, 42, -1, None), OffsetCommit("t", 1, 7, -1, "too long!")], 8)
    assert errors == [ErrorCode.NONE, ErrorCode.OFFSET_METADATA_TOO_LARGE]
    assert written == [("g", {("t", 0): 42})]
    assert seen == ["m"] and told == [("t", 0)]
    with pytest.raises(GroupError) as refused:
        await offsets.commit("g", 2, member.member_id, None, -1, [OffsetCommit("t", 0, 43, -1, None)], 8)
    assert refused.value.error_code == ErrorCode.ILLEGAL_GENERATION and len(written) == 1


class FakeOffsetsStore:
    """Two __consumer_offsets partitions: group "b" lives in 0, "a" in 1 (Kafka's hash rule)."""

    def __init__(self):
        self.forgotten = []
        self.pending_forgotten = []  # partitions whose pending transactional offsets were dropped

    def topic_exists(self):
        return True

    def partition_count(self):
        return 2

    def partition_for(self, group_id):
        return partition_for(group_id, 2)

    def groups_with_offsets(self):
        return []

    def forget_group(self, group_id):
        self.forgotten.append(group_id)

    def forget_pending(self, partition_index):
        self.pending_forgotten.append(partition_index)

    async def load_partition(self, partition, replay, replay_consumer):
        pass  # nothing stored yet


@dataclass
class FakeOffsetsPartition:
    """A `__consumer_offsets` partition as the registry sees it: which one, and whether it leads here."""

    topic_partition: TopicPartition
    is_leader: bool


def _offsets_partition(index: int, *, leader: bool) -> FakeOffsetsPartition:
    return FakeOffsetsPartition(TopicPartition(OFFSETS_TOPIC, index), leader)


async def test_the_registry_serves_only_groups_of_partitions_led_here_and_unloads_the_rest():
    replicas = {0: _offsets_partition(0, leader=True)}  # no replica of partition 1 here

    def offsets_partition(index):
        if index not in replicas:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "no replica here")
        return replicas[index]

    unloaded = []
    store = FakeOffsetsStore()
    registry = GroupRegistry(store, spawn=asyncio.get_running_loop().create_task,
                             offsets_partition=offsets_partition, loaded=lambda group: None,
                             unloaded=unloaded.append)
    assert registry.not_served("b") == ErrorCode.COORDINATOR_NOT_AVAILABLE  # not started
    registry.active = True
    assert registry.not_served("b") == ErrorCode.NOT_COORDINATOR  # led here, but not loaded yet
    registry.partitions.follow([replicas[0]])
    assert registry.not_served("b") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await registry.loading[0]
    assert registry.not_served("b") is None
    assert registry.not_served("a") == ErrorCode.NOT_COORDINATOR

    group = registry.groups["b"] = Group("b", GroupState.STABLE)
    group.add(member := _member("m", 30_000))
    parked = member.join_future = asyncio.get_running_loop().create_future()
    replicas[0] = _offsets_partition(0, leader=False)
    registry.offsets_partition_moved(replicas[0])  # led elsewhere now: unloaded, nothing loaded
    assert parked.result().error == ErrorCode.NOT_COORDINATOR
    assert unloaded == [group] and store.forgotten == ["b"] and "b" not in registry.groups
    assert store.pending_forgotten == [0, 0]  # before the load, and at the unload
    assert registry.not_served("b") == ErrorCode.NOT_COORDINATOR and not registry.loading


def _full_stable_group() -> tuple[RebalanceProtocol, SessionTimers, Group]:
    """A protocol bounding groups to two members, and a Stable group "g" of two, "a" and "b"."""
    registry = FakeRegistry()
    protocol, sessions = _bounded_protocol(registry, max_size=2)
    group = registry.groups["g"] = Group("g", GroupState.STABLE, generation_id=1, protocol_type="consumer")
    for member_id in ("a", "b"):
        group.add(_member(member_id, 30_000))
    return protocol, sessions, group


def _bounded_protocol(registry: FakeRegistry, max_size: int) -> tuple[RebalanceProtocol, SessionTimers]:
    async def store_group(group_id, value):
        return 0

    def spawn(coro):
        return asyncio.get_running_loop().create_task(coro)

    sessions = SessionTimers(registry, expired=lambda group, member: None)
    phases = RebalancePhases(0, sessions, store_group, spawn)
    limits = GroupLimits(1_000, 60_000, max_size)
    return RebalanceProtocol(limits, registry, sessions, phases, store_group, spawn), sessions


def _join(member_id: str) -> JoinRequest:
    return JoinRequest("g", member_id, None, 30_000, 30_000, "consumer", [("range", b"m")], "client", "/127.0.0.1",
                       version=3)


async def test_group_max_size_keeps_members_and_leaves_out_the_last_to_rejoin():
    protocol, sessions, group = _full_stable_group()

    refused = await protocol.join_group(_join(""))  # Stable and full: no newcomer
    assert (refused.error, refused.member_id) == (ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    assert set(group.members) == {"a", "b"}

    a_rejoins = asyncio.ensure_future(protocol.join_group(_join("a")))  # a member is always taken back
    newcomer = asyncio.ensure_future(protocol.join_group(_join("")))  # one of two rejoined so far: taken
    await asyncio.sleep(0)
    assert group.is_in(GroupState.PREPARING_REBALANCE) and len(group.members) == 3
    late = await protocol.join_group(_join("b"))  # two rejoined: the last one is left out, and removed
    assert (late.error, late.member_id) == (ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    answers = await asyncio.wait_for(asyncio.gather(a_rejoins, newcomer), 5)
    assert [(r.error, r.generation_id) for r in answers] == [(ErrorCode.NONE, 2)] * 2
    assert set(group.members) == {"a", answers[1].member_id}
    sessions.cancel_all(group)


async def test_a_group_loaded_over_group_max_size_rebalances():
    protocol, sessions, group = _full_stable_group()
    protocol.group_loaded(group)
    assert group.is_in(GroupState.STABLE)  # at the bound: nothing to do
    group.add(_member("c", 30_000))
    protocol.group_loaded(group)
    assert group.is_in(GroupState.PREPARING_REBALANCE)
    sessions.cancel_all(group)
