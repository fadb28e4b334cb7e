"""ShareCoordinator (broker/share/coordinator.py) on one broker, around a replica stand-in whose
appends the test holds open: operations on one key do not interleave between the fencing check and
the append, a read with a newer leader epoch is stored (fencing the old leader), an older one is
FENCED_LEADER_EPOCH, a read of a key never initialized is INVALID_REQUEST, and a partition whose replay
fails at start is left unserved."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

import broker.share.coordinator as coordinator_module
import broker.share.state_log as state_log
from broker.config import ShareCoordinatorConfig
from broker.log import StorageError
from broker.log.common import TopicPartition
from broker.share.coordinator import ShareCoordinator
from broker.share.state_log import (
    DELETED_START,
    SHARE_STATE_TOPIC,
    ShareState,
    key_bytes,
    parse_record,
    raise_leader_epoch,
    value_bytes,
)
from protocol.errors import ErrorCode


class _Replicas:
    """Appends of `__share_group_state` records, each held until the test releases it (`gate`)."""

    def __init__(self) -> None:
        self.appended: list = []
        self.gate: asyncio.Event | None = None
        self.waiting = 0
        self.in_flight = 0
        self.most_in_flight = 0  # appends held open at once
        self.read_slices = None  # replays are stood in for (_empty_log)

    def partition(self, topic: str, index: int):
        return SimpleNamespace(topic_partition=TopicPartition(topic, index))

    async def append_records(self, items, **_):
        [(_topic, _index, _view, batch)] = items
        if self.gate is not None:
            self.waiting += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            await self.gate.wait()
            self.in_flight -= 1
        self.appended.append(batch)
        return [SimpleNamespace(error_code=0)]


def _coordinator(partitions: int = 1) -> tuple[ShareCoordinator, _Replicas]:
    topic = SimpleNamespace(replicas={i: [0] for i in range(partitions)})
    shared = SimpleNamespace(replicas={0: [0]})  # the share-partitions' topic
    known = {KEY[1], OTHER[1]}
    topics = SimpleNamespace(get=lambda name: topic if name == SHARE_STATE_TOPIC else None,
                             by_id=lambda topic_id: shared if topic_id in known else None,
                             deletion_listeners=[], known=known)
    replicas = _Replicas()
    config = SimpleNamespace(share_coordinator=ShareCoordinatorConfig())
    return ShareCoordinator(config, topics, replicas, in_cluster=False), replicas  # type: ignore[arg-type]


KEY = ("g", uuid.uuid4(), 0)
OTHER = ("g", uuid.uuid4(), 0)


@pytest.fixture(autouse=True)
def _empty_log(monkeypatch):
    """The topic's partitions replay as empty (a test replaces this to make one fail)."""
    async def replay(partition, read_slices, found, leader_epochs):
        return 0
    monkeypatch.setattr(coordinator_module, "replay_partition", replay)


async def _until(condition) -> None:
    while not condition():
        await asyncio.sleep(0)


async def _started(coordinator: ShareCoordinator) -> None:
    """KEY initialized at start offset 5, then written by its leader (leader epoch 1): two appends."""
    await coordinator.start()
    assert await coordinator.initialize(KEY, 0, 5) == ErrorCode.NONE
    assert await coordinator.write(KEY, 0, 1, 5, ()) == ErrorCode.NONE


async def test_an_older_leaders_write_in_flight_with_the_new_ones_does_not_land_last():
    coordinator, replicas = _coordinator()
    await _started(coordinator)
    replicas.gate = asyncio.Event()
    new = asyncio.ensure_future(coordinator.write(KEY, 0, 2, 7, ()))  # the new leader's
    await _until(lambda: replicas.waiting == 1)
    old = asyncio.ensure_future(coordinator.write(KEY, 0, 1, 6, ()))  # the old leader's, while it is in flight
    await asyncio.sleep(0)
    replicas.gate.set()
    assert await new == ErrorCode.NONE
    assert await old == ErrorCode.FENCED_LEADER_EPOCH
    assert coordinator.states[KEY].start_offset == 7
    assert [parse_record(*_record(b))[1].start_offset for b in replicas.appended] == [5, 5, 7]  # type: ignore[union-attr]
    assert len(coordinator._locks) == 0


async def test_a_write_in_flight_with_a_delete_does_not_bring_the_state_back():
    coordinator, replicas = _coordinator()
    await _started(coordinator)
    replicas.gate = asyncio.Event()
    deleting = asyncio.ensure_future(coordinator.delete(KEY))
    await _until(lambda: replicas.waiting == 1)
    writing = asyncio.ensure_future(coordinator.write(KEY, 0, 1, 9, ()))  # a release under the old state epoch
    await asyncio.sleep(0)
    replicas.gate.set()
    assert await deleting == ErrorCode.NONE
    assert await writing == ErrorCode.INVALID_REQUEST  # no state now, as after Kafka's tombstone
    assert coordinator.states[KEY].deleted and coordinator.states[KEY].state_epoch == 1


async def test_a_read_with_a_newer_leader_epoch_is_stored_and_fences_the_old_leader():
    coordinator, replicas = _coordinator()
    await _started(coordinator)
    error, state = await coordinator.read(KEY, 3)
    assert error == ErrorCode.NONE and state is not None and (state.start_offset, state.leader_epoch) == (5, 3)
    assert len(replicas.appended) == 3  # stored before the answer
    assert await coordinator.write(KEY, 0, 1, 6, ()) == ErrorCode.FENCED_LEADER_EPOCH
    assert (await coordinator.read(KEY, 2))[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert (await coordinator.read(KEY, 3))[1] == state and (await coordinator.read(KEY, -1))[1] == state
    assert len(replicas.appended) == 3  # the same or no leader epoch: nothing written


async def test_a_read_of_a_share_partition_never_initialized_is_refused_and_stores_nothing():
    """Kafka 4.3.1's shard: INVALID_REQUEST for a key it holds no state for, whatever the leader epoch
    (a leader does not make the state: the group coordinator initializes it); once initialized, read."""
    coordinator, replicas = _coordinator()
    await _started(coordinator)
    for leader_epoch in (4, -1):
        assert await coordinator.read(OTHER, leader_epoch) == (ErrorCode.INVALID_REQUEST, None)
    assert OTHER not in coordinator.states and len(replicas.appended) == 2
    assert await coordinator.initialize(OTHER, 2, -1) == ErrorCode.NONE
    error, state = await coordinator.read(OTHER, 4)
    assert error == ErrorCode.NONE and state is not None
    assert (state.state_epoch, state.leader_epoch, state.start_offset) == (2, 4, -1)


async def test_writes_of_a_state_no_leader_writes_are_refused():
    coordinator, replicas = _coordinator()
    await _started(coordinator)
    for key, start, batches, error in [
            (("g", KEY[1], -1), 0, (), ErrorCode.INVALID_REQUEST),
            (("g", uuid.uuid4(), 0), 0, (), ErrorCode.INVALID_REQUEST),  # no state: before the topic's check
            (("g", KEY[1], 1), 0, (), ErrorCode.INVALID_REQUEST),
            (KEY, -2, (), ErrorCode.INVALID_REQUEST),
            (KEY, 0, ((5, 4, 0, 1),), ErrorCode.INVALID_REQUEST),
            (KEY, 0, ((-1, 4, 0, 1),), ErrorCode.INVALID_REQUEST),
            (KEY, 0, ((0, 4, 3, 1),), ErrorCode.INVALID_REQUEST),
            (KEY, 0, ((0, 4, 0, -1),), ErrorCode.INVALID_REQUEST)]:
        assert await coordinator.write(key, 0, 1, start, batches) == error, (key, start, batches)
    assert (await coordinator.read(("g", KEY[1], -1), 1))[0] == ErrorCode.INVALID_REQUEST
    # Kafka's order for reads: no state (INVALID_REQUEST), then the leader epoch, then the topic
    assert (await coordinator.read(("g", uuid.uuid4(), 0), 1))[0] == ErrorCode.INVALID_REQUEST
    coordinator.topics.known.discard(KEY[1])  # type: ignore[attr-defined]
    assert (await coordinator.read(KEY, 0))[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert (await coordinator.read(KEY, 1))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert await coordinator.write(KEY, 0, 1, 6, ()) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert len(replicas.appended) == 2 and coordinator.states[KEY].start_offset == 5


async def test_a_deleted_topics_states_go_with_tombstones():
    coordinator, replicas = _coordinator()
    await _started(coordinator)
    assert await coordinator.initialize(OTHER, 1, -1) == ErrorCode.NONE
    coordinator.topics.known.discard(KEY[1])  # type: ignore[attr-defined]
    [listener] = coordinator.topics.deletion_listeners  # type: ignore[attr-defined]
    listener("t")
    await asyncio.gather(*coordinator._tasks)
    assert list(coordinator.states) == [OTHER]
    assert _record(replicas.appended[-1]) == (_record(replicas.appended[0])[0], None)  # KEY's tombstone
    assert len(replicas.appended) == 4


async def test_a_partition_whose_replay_fails_at_start_is_left_unserved(monkeypatch):
    coordinator, _ = _coordinator(partitions=2)
    failing = coordinator.partition_of(KEY)

    async def replay(partition, read_slices, found, leader_epochs):
        if partition.topic_partition.partition == failing:
            raise StorageError("disk gone")
        return 0

    monkeypatch.setattr(coordinator_module, "replay_partition", replay)
    await coordinator.start()
    assert coordinator.active
    assert coordinator.not_served(KEY) == ErrorCode.NOT_COORDINATOR
    served = next(k for k in (("g", uuid.uuid4(), 0) for _ in range(64)) if coordinator.partition_of(k) != failing)
    assert coordinator.not_served(served) is None


def _record(batch) -> tuple[bytes, bytes | None]:
    [record] = list(batch.records())
    return record.key, record.value


async def test_a_write_arriving_as_the_key_changes_hands_waits_its_turn():
    """A released lock reads as unlocked until its next waiter runs: a third write arriving in that gap
    must still queue behind the second, not take a fresh lock of its own."""
    coordinator, replicas = _coordinator()
    await _started(coordinator)
    first_gate = replicas.gate = asyncio.Event()
    first = asyncio.ensure_future(coordinator.write(KEY, 0, 1, 6, ()))
    await _until(lambda: replicas.waiting == 1)
    second = asyncio.ensure_future(coordinator.write(KEY, 0, 1, 7, ()))
    await asyncio.sleep(0)  # queued on the key's lock
    replicas.gate = asyncio.Event()  # the next appends are held again
    first_gate.set()
    third = asyncio.ensure_future(coordinator.write(KEY, 0, 1, 8, ()))  # runs before the second wakes
    await _until(lambda: first.done())
    for _ in range(5):
        await asyncio.sleep(0)
    assert replicas.most_in_flight == 1
    replicas.gate.set()
    assert [await first, await second, await third] == [ErrorCode.NONE] * 3
    assert coordinator.states[KEY].start_offset == 8
    assert len(coordinator._locks) == 0


async def test_initialize_stores_a_first_state_and_a_summary_writes_nothing():
    """InitializeShareGroupState: a new snapshot at the state epoch asked (leader epoch 0, nothing in
    flight), FENCED_STATE_EPOCH below the stored one; ReadShareGroupStateSummary: the state as stored,
    with KIP-1226's count of finished offsets from the start offset on, no append."""
    from broker.share.state_log import delivery_complete_count

    coordinator, replicas = _coordinator()
    await coordinator.start()
    assert coordinator.summary(KEY) == (ErrorCode.NONE, None)
    assert await coordinator.initialize(KEY, 2, 10) == ErrorCode.NONE
    error, state = coordinator.summary(KEY)
    assert error == ErrorCode.NONE and state is not None
    assert (state.state_epoch, state.leader_epoch, state.start_offset, state.batches) == (2, 0, 10, ())
    assert delivery_complete_count(state) == 0 and len(replicas.appended) == 1
    assert await coordinator.initialize(KEY, 1, 3) == ErrorCode.FENCED_STATE_EPOCH
    assert await coordinator.initialize(("g", KEY[1], -1), 2, 0) == ErrorCode.INVALID_REQUEST
    assert await coordinator.initialize(("g", uuid.uuid4(), 0), 2, 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert coordinator.summary(("g", KEY[1], 5))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # archived 8-11 (partly below the start offset), acknowledged 12-13, available 14-15, acquired 16
    assert await coordinator.write(KEY, 2, 1, 10, ((8, 11, 4, 3), (12, 13, 2, 1), (14, 15, 0, 1),
                                                   (16, 16, 1, 1))) == ErrorCode.NONE
    state = coordinator.summary(KEY)[1]
    assert state is not None and delivery_complete_count(state) == 2 + 2
    assert await coordinator.initialize(KEY, -1, -1) == ErrorCode.NONE  # -1: no fencing, no start offset
    state = coordinator.summary(KEY)[1]
    assert state is not None and (state.state_epoch, state.start_offset) == (-1, -1)
    assert delivery_complete_count(state) == -1 and len(replicas.appended) == 3


async def test_a_summary_reads_the_committed_state_without_waiting_for_a_write_in_flight():
    coordinator, replicas = _coordinator()
    await _started(coordinator)
    replicas.gate = asyncio.Event()
    writing = asyncio.ensure_future(coordinator.write(KEY, 0, 1, 9, ()))
    await _until(lambda: replicas.waiting == 1)
    error, state = coordinator.summary(KEY)  # a plain call: nothing to wait for behind the key's write lock
    assert error == ErrorCode.NONE and state is not None and state.start_offset == 5  # what the log holds
    replicas.gate.set()
    assert await writing == ErrorCode.NONE and coordinator.summary(KEY)[1].start_offset == 9  # type: ignore[union-attr]


async def test_an_inactive_coordinator_is_answered_before_the_empty_request_checks_as_kafka():
    """Kafka 4.3.1's ShareCoordinatorService: Initialize, Delete and ReadSummary answer a coordinator not
    active with COORDINATOR_NOT_AVAILABLE for every partition before looking at an empty group id or
    topic; Read and Write look at those first (no result)."""
    from broker.handlers.share_state_requests import answer_each

    broker = SimpleNamespace(authorizer=None, share_coordinator=SimpleNamespace(active=False))
    connection = SimpleNamespace(principal=None, client_host="h")
    topic = SimpleNamespace(topic_id=KEY[1], partitions=[SimpleNamespace(partition=0), SimpleNamespace(partition=1)])

    async def answer(key, asked):
        raise AssertionError("an inactive coordinator answers nothing itself")

    def refused(asked, code):
        return (asked.partition, code)

    def result(**fields):
        return fields

    for group_id in ("", "g"):
        body = SimpleNamespace(group_id=group_id, topics=[topic])
        assert await answer_each(broker, connection, body, result, answer, refused, inactive_first=True) == [
            {"topic_id": KEY[1], "partitions": [(0, ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                                (1, ErrorCode.COORDINATOR_NOT_AVAILABLE)]}]
    body = SimpleNamespace(group_id="", topics=[topic])
    assert await answer_each(broker, connection, body, result, answer, refused) == []


async def test_a_write_of_a_share_partition_without_state_is_refused_before_its_fencing():
    """Kafka 4.3.1's shard: a write of a key it holds no state for is INVALID_REQUEST, even carrying a start
    offset (only InitializeShareGroupState makes a state), checked after the negative partition's and
    before the epochs' and the topic's; nothing is stored."""
    coordinator, replicas = _coordinator()
    await coordinator.start()
    for state_epoch, leader_epoch in ((0, 0), (5, 5), (-1, -1)):
        written = await coordinator.write(OTHER, state_epoch, leader_epoch, 5, ((5, 6, 2, 1),))
        assert written == ErrorCode.INVALID_REQUEST
    coordinator.topics.known.discard(OTHER[1])  # type: ignore[attr-defined]
    assert await coordinator.write(OTHER, 0, 0, 5, ()) == ErrorCode.INVALID_REQUEST  # not UNKNOWN_TOPIC_OR_PARTITION
    assert OTHER not in coordinator.states and replicas.appended == []


async def test_a_deleted_state_is_no_state_and_its_next_initialization_takes_the_epochs_asked():
    """DeleteShareGroupState leaves no state, as Kafka's tombstone: a read (any leader epoch) and a write are
    INVALID_REQUEST, a summary none, a second delete writes nothing. The group's next initialization is fenced
    by nothing and stored at the state epoch asked and leader epoch 0 (the tombstone forgot both), so that the
    recreated group's later initializations at its own group epochs are accepted, as Kafka 4.3.1's."""
    coordinator, replicas = _coordinator()
    await _started(coordinator)  # state epoch 0, leader epoch 1, start offset 5
    assert await coordinator.initialize(KEY, 5, 5) == ErrorCode.NONE
    assert await coordinator.delete(KEY) == ErrorCode.NONE
    for leader_epoch in (1, 2, -1):
        assert await coordinator.read(KEY, leader_epoch) == (ErrorCode.INVALID_REQUEST, None)
    assert await coordinator.write(KEY, 6, 2, 7, ()) == ErrorCode.INVALID_REQUEST
    assert coordinator.summary(KEY) == (ErrorCode.NONE, None)
    assert await coordinator.delete(KEY) == ErrorCode.NONE
    assert len(replicas.appended) == 4
    assert await coordinator.initialize(KEY, 1, -1) == ErrorCode.NONE  # the recreated group's first join
    assert (coordinator.states[KEY].state_epoch, coordinator.states[KEY].leader_epoch) == (1, 0)
    assert await coordinator.initialize(KEY, 2, 7) == ErrorCode.NONE  # its AlterShareGroupOffsets later
    error, state = await coordinator.read(KEY, 0)
    assert error == ErrorCode.NONE and state is not None and (state.state_epoch, state.start_offset) == (2, 7)
    assert await coordinator.write(KEY, 1, 0, 6, ()) == ErrorCode.FENCED_STATE_EPOCH
    # a state initialized without a start offset is deleted too (nothing is left to read)
    assert await coordinator.initialize(OTHER, 3, -1) == ErrorCode.NONE
    assert await coordinator.delete(OTHER) == ErrorCode.NONE
    assert (await coordinator.read(OTHER, 0))[0] == ErrorCode.INVALID_REQUEST
    assert await coordinator.initialize(OTHER, 6, 4) == ErrorCode.NONE
    assert coordinator.states[OTHER].state_epoch == 6


async def test_the_leader_epoch_fences_first_and_only_rises():
    """Kafka 4.3.1's shard checks the leader epoch first and on its own, then the state epoch; its leader epoch
    map only rises (an initialization's record carries 0, a write at -1 the record's, neither lowers it), and a
    write keeps the initialization's state epoch."""
    coordinator, _ = _coordinator()
    await coordinator.start()
    assert await coordinator.initialize(KEY, 5, 0) == ErrorCode.NONE
    assert (await coordinator.read(KEY, 3))[0] == ErrorCode.NONE
    assert await coordinator.write(KEY, 6, 2, 4, ()) == ErrorCode.FENCED_LEADER_EPOCH  # not by the pair (6, 2)
    assert await coordinator.write(KEY, 4, 3, 4, ()) == ErrorCode.FENCED_STATE_EPOCH
    assert await coordinator.write(KEY, 6, -1, 4, ()) == ErrorCode.NONE
    assert (coordinator.states[KEY].state_epoch, coordinator.states[KEY].leader_epoch) == (5, 3)
    assert await coordinator.initialize(KEY, 6, 10) == ErrorCode.NONE  # AlterShareGroupOffsets
    assert (coordinator.states[KEY].leader_epoch, coordinator.leader_epochs[KEY]) == (0, 3)  # the record's: 0
    assert (await coordinator.read(KEY, 2))[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert await coordinator.write(KEY, 6, 2, 11, ()) == ErrorCode.FENCED_LEADER_EPOCH
    assert (await coordinator.read(KEY, 3))[0] == ErrorCode.NONE


def test_the_leader_epoch_fence_is_the_highest_of_the_records_since_the_last_deletion():
    """Kafka's leaderEpochMap as a replay rebuilds it: a record's leader epoch raises it, never lowers it (an
    initialization's record carries 0), and a deletion (tombstone or deleted mark) forgets it."""
    epochs: dict = {}
    for state, expected in ((ShareState(1, 0, -1, (), 0), 0), (ShareState(1, 4, 5, (), 0), 4),
                            (ShareState(2, 0, 7, (), 0), 4), (ShareState(3, 4, DELETED_START, (), 0), None),
                            (ShareState(1, 0, -1, (), 0), 0), (None, None)):
        raise_leader_epoch(epochs, KEY, state)
        assert epochs.get(KEY) == expected


async def test_an_older_ebbs_deletion_record_fences_no_initialization(monkeypatch):
    """An older Ebb stored a deletion as start offset -1, nothing in flight, under the next state epoch and the
    old leader epoch: replayed, it reads as a state initialized without a start offset. The recreated group's
    initializations at its lower group epochs are stored (not FENCED_STATE_EPOCH until the group epoch passes
    the deleted state's), the leader epoch fence is kept; a state with a start offset or batches still fences."""
    def as_older_ebb_wrote(offset: int, state: ShareState):  # its initialize, read, write and delete
        return offset, key_bytes(KEY), value_bytes(state, 0)
    written = [as_older_ebb_wrote(0, ShareState(5, 0, -1, (), 0, 0)),
               as_older_ebb_wrote(1, ShareState(5, 3, -1, (), 0, 1)),
               as_older_ebb_wrote(2, ShareState(5, 3, 10, ((10, 11, 2, 1),), 0, 2)),
               as_older_ebb_wrote(3, ShareState(6, 3, -1, (), 0))]

    async def replay_log(partition, read_slices, on_record, *, stop_on_error):
        for record in written:
            on_record(*record)
        return len(written)
    monkeypatch.setattr(coordinator_module, "replay_partition", state_log.replay_partition)
    monkeypatch.setattr(state_log, "replay_log", replay_log)
    coordinator, _ = _coordinator()
    await coordinator.start()
    assert (coordinator.states[KEY].state_epoch, coordinator.leader_epochs[KEY]) == (6, 3)
    assert await coordinator.initialize(KEY, 1, -1) == ErrorCode.NONE  # the recreated group's first join
    assert coordinator.states[KEY].state_epoch == 1 and coordinator.leader_epochs[KEY] == 3
    assert await coordinator.initialize(KEY, 2, 7) == ErrorCode.NONE  # its AlterShareGroupOffsets
    assert await coordinator.initialize(KEY, 1, 8) == ErrorCode.FENCED_STATE_EPOCH  # a start offset now
    assert (await coordinator.read(KEY, 2))[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert await coordinator.write(KEY, 2, 3, 9, ((9, 9, 2, 1),)) == ErrorCode.NONE
    assert await coordinator.initialize(KEY, 1, -1) == ErrorCode.FENCED_STATE_EPOCH  # batches now
