"""A share group's coordinator has its share-partitions' states initialized as Kafka's does
(broker/group/share_groups.py): record 15 written initializing with the heartbeat's change, the heartbeat
answered, then apart from it the share coordinators asked (InitializeShareGroupState at the group epoch,
start offset -1) and record 15 written initialized; a failure logged (no member's answer), taken back and
asked again; an initialization that does not answer holds back no heartbeat and is the only one asking for
its partitions; one finishing after its group was deleted writes nothing; what a topic grew by asked
alone; record 15 read back at load (nothing asked again), its tombstone with the group's; a group an older Ebb wrote
(no record 15) not reset, only its missing states initialized, by one check per group in the background
that no heartbeat waits for; a partition assigned only once initialized, at the heartbeat after."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from broker.group import share_records
from broker.group.record_log import record_type
from broker.group.share_group import INIT_RETRY_MS, StatePartitions
from broker.group.share_groups import ShareGroups, ShareHeartbeat
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode
from protocol.messages import ShareGroupStatePartitionMetadataValue
from tests.unit.test_consumer_group_records import Log

T1 = uuid.UUID(int=1)
TIMEOUTS = MemberTimeouts(45000, 5000, 0)


class Coordinators:
    """The share coordinators as the group coordinator asks them: each ask kept, answered `error`."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int, dict[uuid.UUID, set[int]]]] = []
        self.error = ErrorCode.NONE

    async def initialize(self, group_id: str, state_epoch: int, partitions: dict[uuid.UUID, set[int]]) -> ErrorCode:
        self.asked.append((group_id, state_epoch, {t: set(p) for t, p in partitions.items()}))
        return self.error


def _groups(log: Log, coordinators: Coordinators | None, partitions: int = 4) -> ShareGroups:
    groups = ShareGroups(100, lambda name: (T1, partitions) if name == "a" else None, other_kind=lambda g: False,
                         append=log.append, spawn=asyncio.get_running_loop().create_task)
    if coordinators is not None:
        groups.initialize_states = coordinators.initialize
    return groups


def _reloaded(log: Log, coordinators: Coordinators, partitions: int = 4) -> ShareGroups:
    """A coordinator that replayed the log and rebuilt its groups."""
    groups = _groups(log, coordinators, partitions)
    for key, value in log.records:
        groups.replay(key, value)
    groups.loaded(45000, taken=lambda g: False)
    return groups


async def _beat(groups: ShareGroups, member: str, epoch: int):
    return await groups.heartbeat(ShareHeartbeat("g", member, epoch, None, ["a"] if epoch == 0 else None, "c", "/h"),
                                  TIMEOUTS)


async def _initialized(groups: ShareGroups) -> None:
    """The initializations the heartbeats started in the background, finished."""
    await asyncio.gather(*(task for tasks in groups._initializing.values() for task in tasks))


def _aged(state: StatePartitions | None) -> StatePartitions:
    """`state` with its asks made INIT_RETRY_MS earlier (due to be asked again)."""
    assert state is not None
    return StatePartitions(state.initialized, {t: (name, parts, at - INIT_RETRY_MS)
                                               for t, (name, parts, at) in state.initializing.items()}, state.deleting)


async def _checked(groups: ShareGroups) -> None:
    """The checks of group states the heartbeats started in the background, finished."""
    await asyncio.gather(*groups._checks.values())


def _state_records(log: Log) -> list[ShareGroupStatePartitionMetadataValue | None]:
    found = []
    for key, value in log.records:
        if record_type(key) == share_records.STATE_PARTITION_METADATA:
            assert key == struct.pack(">hh", 15, 1) + b"g"
            found.append(None if value is None else
                         ShareGroupStatePartitionMetadataValue[0].decode(memoryview(value)[2:]))
    return found


def _topics(infos) -> dict[uuid.UUID, tuple[str, list[int]]]:
    return {t.topic_id: (t.topic_name, list(t.partitions)) for t in infos}


def test_a_first_heartbeat_initializes_the_subscribed_partitions_around_its_ask():
    log, coordinators = Log(), Coordinators()

    async def run():
        groups = _groups(log, coordinators)
        await _beat(groups, "m1", 0)
        await _initialized(groups)
        await _beat(groups, "m1", 1)
        await _beat(groups, "m2", 0)
        groups.stop()
    asyncio.run(run())
    assert coordinators.asked == [("g", 1, {T1: {0, 1, 2, 3}})]  # once, at the group epoch
    # The heartbeat's write ends with record 15 (initializing), after the current assignment, as Kafka's.
    types = [record_type(k) for k, _ in log.records]
    assert types[:6] == [10, 11, 13, 12, 14, 15] and types[6] == 15
    asking, answered = _state_records(log)
    assert asking is not None and answered is not None
    assert _topics(asking.initializing_topics) == {T1: ("a", [0, 1, 2, 3])} and not asking.initialized_topics
    assert _topics(answered.initialized_topics) == {T1: ("a", [0, 1, 2, 3])} and not answered.initializing_topics
    assert not answered.deleting_topics


def test_a_failed_ask_is_no_members_answer_and_is_taken_back_and_asked_again():
    """Kafka answers the heartbeat from its own write and runs the initialization after: the share
    coordinators' error is logged, the partitions taken back from initializing (its
    uninitializeShareGroupState) and asked again at the next heartbeat."""
    log, coordinators = Log(), Coordinators()

    async def run():
        groups = _groups(log, coordinators)
        coordinators.error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        joined = await _beat(groups, "m1", 0)
        assert joined.member_epoch == 1 and groups.groups["g"].members["m1"].epoch == 1
        await _initialized(groups)
        assert groups.groups["g"].state_partitions == StatePartitions()
        coordinators.error = ErrorCode.NONE
        await _beat(groups, "m1", 1)
        await _initialized(groups)
        groups.stop()
    asyncio.run(run())
    assert [epoch for _, epoch, _ in coordinators.asked] == [1, 1]
    asking, taken_back, asking_again, answered = _state_records(log)
    assert taken_back is not None and not taken_back.initializing_topics and not taken_back.initialized_topics
    assert answered is not None and _topics(answered.initialized_topics) == {T1: ("a", [0, 1, 2, 3])}


def test_a_grown_topic_has_only_its_new_partitions_asked():
    log, coordinators = Log(), Coordinators()

    async def run():
        groups = _groups(log, coordinators)
        await _beat(groups, "m1", 0)
        await _initialized(groups)
        groups.stop()
        grown = _reloaded(log, coordinators, partitions=6)
        await _beat(grown, "m1", 1)
        await _initialized(grown)
        grown.stop()
    asyncio.run(run())
    assert [asked for _, _, asked in coordinators.asked] == [{T1: {0, 1, 2, 3}}, {T1: {4, 5}}]
    assert coordinators.asked[1][1] == 2  # the epoch the growth moved the group to
    assert _topics(_state_records(log)[-1].initialized_topics) == {T1: ("a", [0, 1, 2, 3, 4, 5])}


def test_record_15_is_read_back_and_tombstoned_with_the_group():
    log, coordinators = Log(), Coordinators()

    async def run():
        groups = _groups(log, coordinators)
        await _beat(groups, "m1", 0)
        await _initialized(groups)
        kept = groups.groups["g"].state_partitions
        groups.stop()
        restarted = _reloaded(log, coordinators)
        assert list(restarted.groups) == ["g"]
        assert restarted.groups["g"].state_partitions == kept
        await _beat(restarted, "m1", 1)  # nothing asked again
        restarted.groups["g"].members.clear()
        assert await restarted.delete("g") == ErrorCode.NONE
        restarted.stop()
    asyncio.run(run())
    assert len(coordinators.asked) == 1
    tombstones = [record_type(k) for k, v in log.records if v is None]
    assert tombstones.index(12) < tombstones.index(15) < tombstones.index(11)


def test_a_group_an_older_ebb_wrote_keeps_its_states():
    log, coordinators = Log(), Coordinators()

    async def run():
        older = _groups(log, None)  # no record 15: its leaders made the states
        await _beat(older, "m1", 0)
        older.stop()
        assert not _state_records(log)
        now = _reloaded(log, coordinators)
        joined = await _beat(now, "m2", 0)  # the epoch moves at once: the target is computed on those states
        assert joined.assignment is not None and joined.assignment[T1]
        now.stop()
    asyncio.run(run())
    assert coordinators.asked == []  # asking would reset them to share.auto.offset.reset
    [written] = _state_records(log)
    assert written is not None and _topics(written.initialized_topics) == {T1: ("a", [0, 1, 2, 3])}


class OlderGroupCoordinators(Coordinators):
    """Also asked to initialize only what they hold no state for (a group an older Ebb wrote)."""

    def __init__(self) -> None:
        super().__init__()
        self.missing_asked: list[tuple[str, dict[uuid.UUID, set[int]]]] = []
        self.missing_error = ErrorCode.NONE

    async def initialize_missing(self, group_id: str, partitions: dict[uuid.UUID, set[int]]) -> ErrorCode:
        self.missing_asked.append((group_id, {t: set(p) for t, p in partitions.items()}))
        return self.missing_error


async def _rebuilt_failing(log: Log, coordinators: OlderGroupCoordinators,
                           written_by: Coordinators | None) -> ShareGroups:
    """m1's group as a coordinator asking `written_by` wrote it (None: an Ebb before record 15), rebuilt
    by one asking `coordinators`, whose initialize_missing fails until told otherwise."""
    before = _groups(log, written_by)
    await _beat(before, "m1", 0)
    await _initialized(before)
    before.stop()
    now = _reloaded(log, coordinators)
    now.initialize_missing = coordinators.initialize_missing
    coordinators.missing_error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return now


def test_a_group_an_older_ebb_wrote_has_its_missing_states_initialized_first():
    """Its leaders made the states of the partitions they served, and no longer make the others: the
    first heartbeat has the coordinators initialize those missing (not all at the group epoch: that would
    reset the others), in the background, and only then are they taken as initialized and given out. A
    failure is logged, nothing taken (the heartbeat answered, without partitions), and the next heartbeat
    asks again."""
    log, coordinators = Log(), OlderGroupCoordinators()

    async def run():
        now = await _rebuilt_failing(log, coordinators, None)
        joined = await _beat(now, "m2", 0)  # no error Kafka would not send: nothing given out yet
        assert joined.assignment == {}
        await _checked(now)
        assert not _state_records(log) and now.groups["g"].legacy_states
        coordinators.missing_error = ErrorCode.NONE
        epoch = (await _beat(now, "m2", joined.member_epoch)).member_epoch
        await _checked(now)
        taken = await _beat(now, "m2", epoch)  # the first heartbeat after: initialized partitions given out
        assert taken.assignment is not None and taken.assignment[T1]
        await _beat(now, "m2", taken.member_epoch)  # taken as initialized now: not asked again
        await _checked(now)
        await now.heartbeat(ShareHeartbeat("g", "m1", -1, None, None, "c", "/h"), TIMEOUTS)  # a leave asks nothing
        now.stop()
    asyncio.run(run())
    assert coordinators.asked == []
    assert coordinators.missing_asked == [("g", {T1: {0, 1, 2, 3}})] * 2
    [written] = _state_records(log)
    assert written is not None and _topics(written.initialized_topics) == {T1: ("a", [0, 1, 2, 3])}


def test_a_group_rebuilt_with_record_15_has_states_missing_behind_it_initialized_once():
    """The Ebb before this one wrote an older group's record 15 with every partition initialized without
    asking (its leaders made the states): at the first heartbeat after a load the coordinators initialize
    those missing; a failure does not fail the heartbeat and is asked again; once done, not again."""
    log, coordinators = Log(), OlderGroupCoordinators()

    async def run():
        now = await _rebuilt_failing(log, coordinators, coordinators)
        epoch = (await _beat(now, "m1", 1)).member_epoch  # answered all the same (no GroupError)
        await _checked(now)
        coordinators.missing_error = ErrorCode.NONE
        for _ in range(2):
            epoch = (await _beat(now, "m1", epoch)).member_epoch
            await _checked(now)
        await now.heartbeat(ShareHeartbeat("g", "m1", -1, None, None, "c", "/h"), TIMEOUTS)
        now.stop()
    asyncio.run(run())
    assert coordinators.missing_asked == [("g", {T1: {0, 1, 2, 3}})] * 2
    assert len(coordinators.asked) == 1  # the first initialization only: nothing reset at a group epoch


def _share_coordinator():
    """A share coordinator (its partition loaded, empty) over topic T1 of four partitions."""
    from types import SimpleNamespace

    from tests.unit.test_share_coordinator import _coordinator

    coordinator, _ = _coordinator()
    coordinator.active = True
    four = SimpleNamespace(replicas={p: [0] for p in range(4)})
    coordinator.topics.by_id = lambda topic_id: four if topic_id == T1 else None  # type: ignore[attr-defined]
    return coordinator


def _wired(groups: ShareGroups, coordinator) -> ShareGroups:
    """The group coordinator asking `coordinator` through a persister, as app.py wires it."""
    from types import SimpleNamespace

    from broker.share.persister import StatePersister

    persister = StatePersister(coordinator, 0, SimpleNamespace())  # type: ignore[arg-type]
    groups.initialize_states, groups.initialize_missing = persister.initialize, persister.initialize_missing
    return groups


def test_a_record_15_written_without_asking_is_made_good_over_a_share_coordinator():
    """End to end: the Ebb before this one marked an older group's partitions initialized in record 15
    and asked nothing (its leaders made the states they fetched; here none was fetched). After a load the
    first heartbeat has every one initialized at state epoch 0, and each leader can read its state."""
    log = Log()

    async def run():
        coordinator = _share_coordinator()
        before = _groups(log, Coordinators())  # record 15 written initialized, nothing stored: that Ebb's way
        await _beat(before, "m1", 0)
        await _initialized(before)
        before.stop()
        assert coordinator.states == {}
        now = _wired(_reloaded(log, Coordinators()), coordinator)
        await _beat(now, "m1", 1)
        await _checked(now)
        now.stop()
        keys = [("g", T1, p) for p in range(4)]
        assert [(await coordinator.read(k, 1))[0] for k in keys] == [ErrorCode.NONE] * 4
        return {k[2]: (s.state_epoch, s.start_offset) for k, s in coordinator.states.items()}
    assert asyncio.run(run()) == dict.fromkeys(range(4), (0, -1))


def test_an_older_ebbs_group_keeps_its_leaders_states_and_has_the_others_initialized():
    """End to end over the persister and a share coordinator: of an older Ebb's group, the state its
    leader wrote stays as it was, one its leader only read (no start offset) and those never made are
    initialized at state epoch 0, so that each partition's leader can read a state now (none is refused)."""
    log = Log()
    keys = [("g", T1, p) for p in range(4)]

    async def run():
        coordinator = _share_coordinator()
        # what the older Ebb's leaders left: partition 0 read and written, partition 1 read only
        assert await coordinator.initialize(keys[0], 0, -1) == await coordinator.initialize(keys[1], 0, -1)
        assert (await coordinator.read(keys[0], 2))[0] == (await coordinator.read(keys[1], 2))[0] == ErrorCode.NONE
        assert await coordinator.write(keys[0], 0, 2, 5, ((5, 6, 2, 1),)) == ErrorCode.NONE
        assert [(await coordinator.read(k, 0))[0] for k in keys[2:]] == [ErrorCode.INVALID_REQUEST] * 2
        older = _groups(log, None)
        await _beat(older, "m1", 0)
        older.stop()
        now = _wired(_reloaded(log, Coordinators()), coordinator)
        joined = await _beat(now, "m2", 0)
        await _checked(now)
        taken = await _beat(now, "m2", joined.member_epoch)
        assert taken.assignment is not None and taken.assignment[T1]
        now.stop()
        assert [(await coordinator.read(k, 3))[0] for k in keys] == [ErrorCode.NONE] * 4
        return {k[2]: (s.state_epoch, s.start_offset, s.batches) for k, s in coordinator.states.items()}
    assert asyncio.run(run()) == {0: (0, 5, ((5, 6, 2, 1),)), 1: (0, -1, ()), 2: (0, -1, ()), 3: (0, -1, ())}


def test_an_ask_is_made_again_only_once_the_retry_interval_passed():
    state = StatePartitions().asked({T1: "a"}, {T1: {0, 1}}, now_ms=1000)
    topics = {"a": (T1, 2)}
    assert state.to_initialize(topics, 1000 + INIT_RETRY_MS - 1) == {}
    assert state.to_initialize(topics, 1000 + INIT_RETRY_MS) == {T1: {0, 1}}
    done = state.answered({T1: {0}}, done=True)
    assert done.initialized == {T1: ("a", frozenset({0}))} and done.initializing[T1][1] == frozenset({1})
    assert done.forgotten({T1}) == StatePartitions()


class HeldCoordinators(Coordinators):
    """Coordinators that answer only once `release` is set, so that others heartbeat meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.asking = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    async def initialize(self, group_id: str, state_epoch: int, partitions: dict[uuid.UUID, set[int]]) -> ErrorCode:
        self.calls += 1
        self.asking.set()
        await self.release.wait()
        return await super().initialize(group_id, state_epoch, partitions)


def test_a_partition_is_assigned_only_once_its_state_is_initialized():
    log, coordinators = Log(), HeldCoordinators()

    async def run():
        groups = _groups(log, coordinators)
        answered = await _beat(groups, "m1", 0)  # answered while the initialization it asked for waits
        assert answered.member_epoch == 1 and answered.assignment == {}
        await coordinators.asking.wait()
        # m2 joins while m1's initialization is under way: nothing of the uninitialized topic for it
        joined = await _beat(groups, "m2", 0)
        assert joined.member_epoch == 2 and joined.assignment == {}
        assert groups.groups["g"].target == {"m1": {}, "m2": {}}
        coordinators.release.set()
        await _initialized(groups)
        # the next heartbeat (any member's) finds initialized partitions unassigned: the group epoch moves
        again = await _beat(groups, "m2", 2)
        assert again.member_epoch == 3 and again.assignment is not None
        caught_up = await _beat(groups, "m1", 1)
        assert caught_up.member_epoch == 3 and caught_up.assignment is not None
        assert sorted(again.assignment[T1] | caught_up.assignment[T1]) == [0, 1, 2, 3]
        assert not again.assignment[T1] & caught_up.assignment[T1]
        steady = await _beat(groups, "m1", 3)  # all given out: the epoch stays
        assert steady.member_epoch == 3
        groups.stop()
    asyncio.run(run())
    assert [epoch for _, epoch, _ in coordinators.asked] == [1]  # m2's join asked nothing again



class WalkedAssignment(dict):
    """A member's target assignment that counts the walks over it."""
    walks = 0

    def items(self):
        WalkedAssignment.walks += 1
        return super().items()


class WalkedSubscription(list):
    """A member's subscribed topic names that count the walks over them."""
    walks = 0

    def __iter__(self):
        WalkedSubscription.walks += 1
        return super().__iter__()


def test_a_steady_heartbeat_walks_no_other_members_target_or_subscription():
    log, coordinators = Log(), Coordinators()

    async def run():
        groups = _groups(log, coordinators)
        epochs = {member: (await _beat(groups, member, 0)).member_epoch for member in ("m1", "m2", "m3")}
        await _initialized(groups)
        for member in ("m1", "m2", "m3"):  # the first after the initialization moves the group epoch
            epochs[member] = (await _beat(groups, member, epochs[member])).member_epoch
        group = groups.groups["g"]
        epoch = group.group_epoch
        assert set(epochs.values()) == {epoch}
        assert sorted(p for a in group.target.values() for p in a[T1]) == [0, 1, 2, 3]
        # what the others are given, the same partitions, in assignments that count their walks
        group.target = {m: a if m == "m1" else WalkedAssignment(a) for m, a in group.target.items()}
        for member_id, member in group.members.items():
            if member_id != "m1":
                member.subscribed = WalkedSubscription(member.subscribed)
        WalkedAssignment.walks = WalkedSubscription.walks = 0
        steady = await _beat(groups, "m1", epoch)
        assert steady.member_epoch == epoch and group.group_epoch == epoch
        assert WalkedAssignment.walks == 0  # the check for initialized partitions not given out walks none
        assert WalkedSubscription.walks == 0  # nor does the look at the subscribed topics
        groups.stop()
    asyncio.run(run())


T2 = uuid.UUID(int=2)


async def _older_group_reloaded(log: Log, coordinators: OlderGroupCoordinators, subscribed: list[str],
                                leave: bool) -> ShareGroups:
    """A group an older Ebb wrote (no record 15: m1 on `subscribed`, gone again when `leave`), rebuilt by a
    coordinator asking `coordinators` over topics a (4 partitions) and b (2)."""
    topics = {"a": (T1, 4), "b": (T2, 2)}
    older = ShareGroups(100, topics.get, other_kind=lambda g: False, append=log.append,
                        spawn=asyncio.get_running_loop().create_task)
    await older.heartbeat(ShareHeartbeat("g", "m1", 0, None, subscribed, "c", "/h"), TIMEOUTS)
    if leave:
        await older.heartbeat(ShareHeartbeat("g", "m1", -1, None, None, "c", "/h"), TIMEOUTS)
    older.stop()
    now = ShareGroups(100, topics.get, other_kind=lambda g: False, append=log.append,
                      spawn=asyncio.get_running_loop().create_task)
    now.initialize_states, now.initialize_missing = coordinators.initialize, coordinators.initialize_missing
    for key, value in log.records:
        now.replay(key, value)
    now.loaded(45000, taken=lambda g: False)
    return now


def test_an_older_ebbs_empty_group_is_not_reset_by_the_next_join():
    """An older Ebb's group left Empty: the joining member's topics are its states' topics; asked to
    initialize at the group epoch (start offset -1) they would lose the progress its leaders stored."""
    log, coordinators = Log(), OlderGroupCoordinators()

    async def run():
        now = await _older_group_reloaded(log, coordinators, ["a"], leave=True)
        await now.heartbeat(ShareHeartbeat("g", "m2", 0, None, ["a"], "c", "/h"), TIMEOUTS)
        await _checked(now)
        now.stop()
    asyncio.run(run())
    assert coordinators.asked == []
    assert coordinators.missing_asked == [("g", {T1: {0, 1, 2, 3}})]
    assert _topics(_state_records(log)[-1].initialized_topics) == {T1: ("a", [0, 1, 2, 3])}


def test_a_topic_an_older_ebbs_member_subscribes_to_anew_is_not_reset():
    """Its member adds topic b at its first heartbeat after the load: b's states (an earlier member's,
    say) are checked with a's, not initialized at the group epoch."""
    log, coordinators = Log(), OlderGroupCoordinators()

    async def run():
        now = await _older_group_reloaded(log, coordinators, ["a"], leave=False)
        await now.heartbeat(ShareHeartbeat("g", "m1", 1, None, ["a", "b"], "c", "/h"), TIMEOUTS)
        await _checked(now)
        now.stop()
    asyncio.run(run())
    assert coordinators.asked == []
    assert coordinators.missing_asked == [("g", {T1: {0, 1, 2, 3}, T2: {0, 1}})]
    assert _topics(_state_records(log)[-1].initialized_topics) == {T1: ("a", [0, 1, 2, 3]), T2: ("b", [0, 1])}


@pytest.mark.parametrize("written_by", [None, Coordinators], ids=["older-ebb", "record-15"])
def test_a_share_coordinator_that_does_not_answer_holds_back_no_heartbeat(written_by):
    """The check of a group's states waits on the share coordinators' summaries, which here never come:
    the heartbeats are answered all the same (an older Ebb's group gives out nothing meanwhile, a group
    with a record 15 what it had), and the members' heartbeats make one check, not one each."""
    from types import SimpleNamespace

    from broker.share.persister import StatePersister
    log = Log()
    summaries: list[list] = []

    async def silent(keys):
        summaries.append(keys)
        await asyncio.Event().wait()

    async def run():
        before = _groups(log, None if written_by is None else written_by())
        await _beat(before, "m1", 0)
        await _initialized(before)
        before.stop()
        now = _reloaded(log, Coordinators())
        persister = StatePersister(_share_coordinator(), 0, SimpleNamespace())  # type: ignore[arg-type]
        persister.summaries = silent  # type: ignore[method-assign]
        now.initialize_missing = persister.initialize_missing
        async with asyncio.timeout(5):
            answers = await asyncio.gather(*(_beat(now, m, 0) for m in ("m2", "m3", "m4")))
            answers.append(await _beat(now, "m2", answers[0].member_epoch))
        assert len(summaries) == 1 and all(answer.member_epoch > 0 for answer in answers)
        given = {p for assignment in now.groups["g"].target.values() for p in assignment.get(T1, set())}
        assert given == (set() if written_by is None else {0, 1, 2, 3})
        assert now.groups["g"].legacy_states == (written_by is None)
        checks = list(now._checks.values())
        now.stop()  # cancels the check
        await asyncio.gather(*checks, return_exceptions=True)
        assert not now._checks
    asyncio.run(run())


def test_a_topic_subscribed_while_an_older_ebbs_group_is_checked_is_checked_before_record_15():
    """A member subscribes to b while the check over a waits on the share coordinators: record 15 is not
    written with a alone (the group would stop being an older Ebb's, and b be initialized at the group
    epoch): the check runs again over a and b first."""
    log = Log()

    class Held(OlderGroupCoordinators):
        def __init__(self) -> None:
            super().__init__()
            self.asking, self.release = asyncio.Event(), asyncio.Event()

        async def initialize_missing(self, group_id: str, partitions: dict[uuid.UUID, set[int]]) -> ErrorCode:
            self.asking.set()
            await self.release.wait()
            return await super().initialize_missing(group_id, partitions)
    coordinators = Held()

    async def run():
        now = await _older_group_reloaded(log, coordinators, ["a"], leave=False)
        epoch = (await now.heartbeat(ShareHeartbeat("g", "m1", 1, None, None, "c", "/h"), TIMEOUTS)).member_epoch
        await coordinators.asking.wait()
        await now.heartbeat(ShareHeartbeat("g", "m1", epoch, None, ["a", "b"], "c", "/h"), TIMEOUTS)
        coordinators.release.set()
        await _checked(now)
        now.stop()
    asyncio.run(run())
    assert coordinators.asked == []
    assert coordinators.missing_asked == [("g", {T1: {0, 1, 2, 3}}), ("g", {T1: {0, 1, 2, 3}, T2: {0, 1}})]
    [written] = _state_records(log)
    assert _topics(written.initialized_topics) == {T1: ("a", [0, 1, 2, 3]), T2: ("b", [0, 1])}


def test_an_initialization_that_does_not_answer_holds_back_no_heartbeat():
    """The share coordinators never answer: each heartbeat is answered from its own write (Kafka's
    GroupCoordinatorService runs persisterInitialize after it); the partitions are not asked again while
    that initialization is under way, even past INIT_RETRY_MS; unloading the group cancels it."""
    log, coordinators = Log(), HeldCoordinators()  # never released

    async def run():
        groups = _groups(log, coordinators)
        async with asyncio.timeout(5):
            joined = await _beat(groups, "m1", 0)
            await coordinators.asking.wait()
            group = groups.groups["g"]
            group.state_partitions = _aged(group.state_partitions)
            again = await _beat(groups, "m1", joined.member_epoch)
        assert joined.member_epoch == again.member_epoch == 1 and again.assignment is None
        [task] = [task for tasks in groups._initializing.values() for task in tasks]
        groups.stop()
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled() and not groups._initializing
    asyncio.run(run())
    assert coordinators.calls == 1


def test_an_answer_not_written_is_asked_again_once_the_retry_interval_passed():
    """The share coordinators fail, and the write taking the partitions back fails too: they stay
    initializing as record 15 holds them, and are asked again only after INIT_RETRY_MS (Kafka's
    group.share.initialize.retry.interval.ms); the heartbeats meanwhile are answered without error."""
    log, coordinators = Log(), HeldCoordinators()

    async def run():
        groups = _groups(log, coordinators)
        coordinators.error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        epoch = (await _beat(groups, "m1", 0)).member_epoch
        await coordinators.asking.wait()
        log.fail = ErrorCode.NOT_COORDINATOR
        coordinators.release.set()
        await _initialized(groups)
        log.fail = None
        group = groups.groups["g"]
        assert group.state_partitions is not None and group.state_partitions.initializing
        coordinators.error = ErrorCode.NONE
        assert (await _beat(groups, "m1", epoch)).member_epoch == epoch
        await _initialized(groups)
        assert coordinators.calls == 1  # asked within the interval: not again
        group.state_partitions = _aged(group.state_partitions)
        await _beat(groups, "m1", epoch)
        await _initialized(groups)
        groups.stop()
    asyncio.run(run())
    assert coordinators.calls == 2 and [epoch for _, epoch, _ in coordinators.asked] == [1, 1]
    assert _topics(_state_records(log)[-1].initialized_topics) == {T1: ("a", [0, 1, 2, 3])}


class GatedCoordinators(Coordinators):
    """Coordinators that answer each ask once its own gate is opened."""

    def __init__(self) -> None:
        super().__init__()
        self.gates: list[asyncio.Event] = []
        self.arrived: asyncio.Queue[None] = asyncio.Queue()  # one item per ask made

    async def initialize(self, group_id: str, state_epoch: int, partitions: dict[uuid.UUID, set[int]]) -> ErrorCode:
        gate = asyncio.Event()
        self.gates.append(gate)
        self.arrived.put_nowait(None)
        await gate.wait()
        return await super().initialize(group_id, state_epoch, partitions)


def test_an_initialization_finishing_after_its_group_was_deleted_writes_nothing():
    """m1's group is deleted while its initialization waits, and a group of the same id made again by m2
    asks for its own (the deleted group's ask holds back none of it). The deleted group's answer writes
    nothing, not even into the new group's record 15; the new group's answer is written."""
    log, coordinators = Log(), GatedCoordinators()

    async def run():
        groups = _groups(log, coordinators)
        await _beat(groups, "m1", 0)
        [deleted_ask] = list(groups._initializing["g"])
        await groups.heartbeat(ShareHeartbeat("g", "m1", -1, None, None, "c", "/h"), TIMEOUTS)
        assert await groups.delete("g") == ErrorCode.NONE
        await _beat(groups, "m2", 0)
        [new_ask] = [task for task in groups._initializing["g"] if task is not deleted_ask]
        for _ in range(2):
            await coordinators.arrived.get()
        written = len(log.records)
        coordinators.gates[0].set()
        await deleted_ask
        assert len(log.records) == written
        state = groups.groups["g"].state_partitions
        assert state is not None and state.initializing
        coordinators.gates[1].set()
        await new_ask
        groups.stop()
        return log.records[written:]
    after = asyncio.run(run())
    assert [record_type(key) for key, _ in after] == [15]
    assert _topics(_state_records(log)[-1].initialized_topics) == {T1: ("a", [0, 1, 2, 3])}
    assert [epoch for _, epoch, _ in coordinators.asked] == [1, 1]


def test_deleted_offsets_leave_no_state_until_the_next_subscribing_heartbeat_initializes_them_again():
    """End to end over the persister and a share coordinator: DeleteShareGroupOffsets leaves its states
    unreadable (INVALID_REQUEST, as after Kafka's tombstone: the leader answers UNKNOWN_SERVER_ERROR rather
    than start from share.auto.offset.reset) and takes the topic out of record 15, so that the next member
    subscribing has them initialized again; the leader that held a state before the deletion stays fenced."""
    log = Log()

    async def run():
        coordinator = _share_coordinator()
        groups = _wired(_groups(log, None), coordinator)
        persister = groups.initialize_states.__self__  # type: ignore[union-attr]

        async def delete_states(group_id, topics):
            for topic_id, (_, parts) in topics.items():
                for p in parts:
                    await persister.delete((group_id, topic_id, p))
            return dict.fromkeys(topics, ErrorCode.NONE)
        groups.delete_states = delete_states
        keys = [("g", T1, p) for p in range(4)]
        await _beat(groups, "m1", 0)
        await _initialized(groups)
        assert [(await coordinator.read(k, 1))[0] for k in keys] == [ErrorCode.NONE] * 4
        await groups.heartbeat(ShareHeartbeat("g", "m1", -1, None, None, "c", "/h"), TIMEOUTS)
        assert [d.error for d in await groups.delete_offsets("g", ["a"])] == [ErrorCode.NONE]
        assert [(await coordinator.read(k, 1))[0] for k in keys] == [ErrorCode.INVALID_REQUEST] * 4
        await _beat(groups, "m2", 0)
        await _initialized(groups)
        groups.stop()
        read = [await coordinator.read(k, 1) for k in keys]
        assert [(e, s.start_offset) for e, s in read] == [(ErrorCode.NONE, -1)] * 4  # type: ignore[union-attr]
        assert await coordinator.write(keys[0], 1, 1, 5, ()) == ErrorCode.FENCED_STATE_EPOCH  # read before
    asyncio.run(run())


def test_altered_offsets_are_written_initializing_then_initialized_around_their_initialization():
    """AlterShareGroupOffsets' part in record 15, as Kafka's coordinator writes it: the partitions as
    initializing before their share coordinators are asked (at the group epoch, which it returns), then
    initialized once all are; a group with members is NON_EMPTY_GROUP and nothing is written."""
    from broker.group.group import GroupError

    log = Log()

    async def run():
        groups = _groups(log, Coordinators())
        await groups.ensure("g")
        assert await groups.states_altering("g", {T1: ("a", {1, 2})}) == 0
        asking = _state_records(log)[-1]
        assert asking is not None and _topics(asking.initializing_topics) == {T1: ("a", [1, 2])}
        await groups.states_set("g", {T1: {1, 2}})
        done = _state_records(log)[-1]
        assert done is not None and _topics(done.initialized_topics) == {T1: ("a", [1, 2])}
        assert not done.initializing_topics
        await _beat(groups, "m1", 0)
        written = len(log.records)
        with pytest.raises(GroupError) as refused:
            await groups.states_altering("g", {T1: ("a", {0})})
        assert refused.value.error_code == ErrorCode.NON_EMPTY_GROUP and len(log.records) == written
        groups.stop()
    asyncio.run(run())
