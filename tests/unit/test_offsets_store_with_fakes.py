"""The offsets store takes its settings, the topics and the data path in its constructor, so small
fakes stand in for them: a topic table that records creations, a data path that answers each append
with the result a test chooses."""

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from broker.group.group import GroupError
from broker.group.offsets_store import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_CONFIGS,
    CommittedOffset,
    OffsetsStore,
    OffsetsTopicSettings,
    partition_for,
)
from broker.replica import AppendOrigin, AppendResult
from broker.topic_placement import TopicError
from protocol.batch_header import assign_offsets
from protocol.control_records import ControlType, build_marker_batch
from protocol.errors import ErrorCode
from protocol.records import iter_batches

SETTINGS = OffsetsTopicSettings(num_partitions=5, replication_factor=3, commit_timeout_ms=1234)


@dataclass
class FakeTopic:
    replicas: dict[int, list[int]]


@dataclass
class FakeTopics:
    """The topic table: `__consumer_offsets` once created (or when made with `partitions`)."""

    partitions: int | None = None
    refuse: TopicError | None = None
    created: list[tuple] = field(default_factory=list)

    def get(self, name):
        if name != OFFSETS_TOPIC or self.partitions is None:
            return None
        return FakeTopic({i: [1] for i in range(self.partitions)})

    async def create(self, name, num_partitions, replication_factor, configs=None):
        self.created.append((name, num_partitions, replication_factor, dict(configs or {})))
        if self.refuse is not None:
            raise self.refuse
        self.partitions = num_partitions
        return self.get(name)


@dataclass
class FakeReplicas:
    """The data path: records each append and answers it with `answer`."""

    answer: AppendResult = AppendResult(7, 7, -1, 0)
    appends: list[tuple] = field(default_factory=list)

    async def append_records(self, entries, required_acks, timeout_ms, origin, internal_topics_allowed=False,
                             verification_guards=None, appended=None):
        self.appends.append((entries, required_acks, timeout_ms, origin, internal_topics_allowed))
        return [self.answer for _ in entries]

    def partition(self, topic, index):
        raise AssertionError("not replayed in these tests")

    async def read_slices(self, groups):
        raise AssertionError("not replayed in these tests")


async def test_an_append_goes_to_the_groups_partition_with_acks_all_and_the_commit_timeout():
    topics, replicas = FakeTopics(), FakeReplicas()
    store = OffsetsStore(SETTINGS, topics, replicas)
    assert store.partition_count() == 5  # the setting, before the topic exists
    assert await store.append("g", [(b"k", b"v")], timestamp=99) == 7
    assert topics.created == [(OFFSETS_TOPIC, 5, 3, OFFSETS_TOPIC_CONFIGS)]
    [(entries, acks, timeout_ms, origin, internal)] = replicas.appends
    [(topic, index, data, _)] = entries
    assert (topic, index) == (OFFSETS_TOPIC, partition_for("g", 5))
    assert (acks, timeout_ms, origin, internal) == (-1, 1234, AppendOrigin.COORDINATOR, True)
    [batch] = list(iter_batches(bytes(data)))
    assert [(r.key, r.value, r.timestamp) for r in batch.records()] == [(b"k", b"v", 99)]


async def test_an_existing_topic_keeps_its_partition_count():
    store = OffsetsStore(SETTINGS, topics := FakeTopics(partitions=2), FakeReplicas())
    await store.ensure_topic()
    assert store.partition_count() == 2 and store.partition_for("g") == partition_for("g", 2)
    assert topics.created == []


@pytest.mark.parametrize(("appended", "answered"), [
    (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
    (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
    (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),  # the caller's choice
])
async def test_append_errors_are_answered_as_kafkas_coordinator_answers_them(appended, answered):
    replicas = FakeReplicas(AppendResult(-1, -1, -1, -1, error_code=appended, error_message="why"))
    store = OffsetsStore(SETTINGS, FakeTopics(partitions=1), replicas)
    with pytest.raises(GroupError) as refused:
        await store.append("g", [(b"k", None)], too_large=ErrorCode.INVALID_COMMIT_OFFSET_SIZE)
    assert refused.value.error_code == answered


async def test_a_failed_topic_creation_is_coordinator_not_available_and_a_lost_race_is_not():
    refused = OffsetsStore(SETTINGS, FakeTopics(refuse=TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, "3 > 1")),
                           FakeReplicas())
    with pytest.raises(GroupError) as failed:
        await refused.ensure_topic()
    assert failed.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    raced = OffsetsStore(SETTINGS, FakeTopics(refuse=TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, "exists")),
                         FakeReplicas())
    await raced.ensure_topic()  # created meanwhile by another broker: no error


class HeldReplicas(FakeReplicas):
    """Each append waits until the test answers it: `release(i, base_offset)` or `fail(i)`. Answering
    only schedules the writer's task, so what runs before it resumes is up to the test. `place(i,
    base_offset)` alone puts the batch in the log, its acks still awaited (the writer is told if it asked)."""

    def __init__(self):
        super().__init__()
        self.held: list[asyncio.Future] = []
        self.told: list = []  # each append's `appended`
        self.arrived = asyncio.Condition()

    async def append_records(self, entries, required_acks, timeout_ms, origin, internal_topics_allowed=False,
                             verification_guards=None, appended=None):
        self.appends.append((entries, required_acks, timeout_ms, origin, internal_topics_allowed))
        answer = asyncio.get_running_loop().create_future()
        async with self.arrived:
            self.held.append(answer)
            self.told.append(appended)
            self.arrived.notify_all()
        return [await answer]

    async def wait_for(self, count):
        async with self.arrived:
            await self.arrived.wait_for(lambda: len(self.held) >= count)

    def place(self, index, base_offset):
        appended, self.told[index] = self.told[index], None
        if appended is not None:
            appended(0, AppendResult(base_offset, base_offset, -1, 0))

    def release(self, index, base_offset):
        self.place(index, base_offset)
        self.held[index].set_result(AppendResult(base_offset, base_offset, -1, 0))

    def fail(self, index):
        self.held[index].set_result(AppendResult(-1, -1, -1, -1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER))


PID = 4000


def offset(value):
    return CommittedOffset(value, -1, "", 1, None)


async def _txn_commit_answered_then_marker(commit):
    replicas = HeldReplicas()
    store = OffsetsStore(SETTINGS, FakeTopics(partitions=1), replicas)
    task = asyncio.create_task(store.commit_transactional("g", {("t", 0): offset(5)}, PID, 0))
    await replicas.wait_for(1)
    replicas.release(0, 10)
    store.transaction_completed(0, PID, commit, 11)  # the marker's listener, before the commit's task resumes
    await task
    return store


async def test_a_commit_marker_before_the_txn_offset_commit_resumes_commits_its_offsets():
    """The offsets were made pending only after their append: a marker reported in between found nothing,
    and they stayed pending for good (OffsetFetch with require_stable UNSTABLE_OFFSET_COMMIT forever)."""
    store = await _txn_commit_answered_then_marker(commit=True)
    committed = store.get("g", "t", 0)
    assert committed is not None and (committed.offset, committed.record_offset) == (5, 10)
    assert not store.has_pending("g", "t", 0)


async def test_an_abort_marker_before_the_txn_offset_commit_resumes_drops_its_offsets():
    """...and a later commit marker of the same producer id (kept across epochs) committed them."""
    store = await _txn_commit_answered_then_marker(commit=False)
    assert store.get("g", "t", 0) is None and not store.has_pending("g", "t", 0)
    store.transaction_completed(0, PID, True, 12)
    assert store.get("g", "t", 0) is None


async def test_a_failed_txn_offset_commit_takes_back_only_its_own_pending_offsets():
    replicas = HeldReplicas()
    store = OffsetsStore(SETTINGS, FakeTopics(partitions=1), replicas)
    first = asyncio.create_task(store.commit_transactional("g", {("t", 0): offset(5), ("t", 1): offset(6)}, PID, 0))
    await replicas.wait_for(1)
    second = asyncio.create_task(store.commit_transactional("g", {("t", 0): offset(7)}, PID, 0))
    await replicas.wait_for(2)
    replicas.fail(0)
    with pytest.raises(GroupError):
        await first
    assert store.has_pending("g", "t", 0) and not store.has_pending("g", "t", 1)  # t-0 is the second's now
    replicas.release(1, 20)
    await second
    store.transaction_completed(0, PID, True, 21)
    committed = store.get("g", "t", 0)
    assert committed is not None and (committed.offset, committed.record_offset) == (7, 20)
    assert store.get("g", "t", 1) is None


async def test_a_commit_resuming_after_a_later_tombstone_does_not_bring_the_offset_back():
    """A commit appended at 10, its tombstone (OffsetDelete, expiry) at 11: the tombstone's task resumed
    first, then the commit's stored 10 — an offset the log had deleted, gone again after a reload."""
    replicas = HeldReplicas()
    store = OffsetsStore(SETTINGS, FakeTopics(partitions=1), replicas)
    commit = asyncio.create_task(store.commit("g", {("t", 0): offset(5)}))
    await replicas.wait_for(1)
    delete = asyncio.create_task(store.delete("g", [("t", 0)]))
    await replicas.wait_for(2)
    replicas.release(1, 11)
    await delete
    newer = asyncio.create_task(store.commit("g", {("t", 1): offset(8)}))
    await replicas.wait_for(3)
    replicas.release(2, 12)
    await newer
    replicas.release(0, 10)
    await commit
    assert store.get("g", "t", 0) is None
    assert store.get("g", "t", 1) is not None  # written after the tombstone: stored
    # with nothing in flight, the tombstones are forgotten: a new commit of the partition is stored
    again = asyncio.create_task(store.commit("g", {("t", 0): offset(9)}))
    await replicas.wait_for(4)
    replicas.release(3, 13)
    await again
    committed = store.get("g", "t", 0)
    assert committed is not None and committed.offset == 9


class LoggedReplicas(HeldReplicas):
    """HeldReplicas over one real log of bytes: a batch takes the next offset when the test places it,
    `marker(commit)` writes a marker there as the transaction coordinator's MarkerWriter would, and a
    store's `load` replays what was written, as after a restart or on a new coordinator."""

    def __init__(self):
        super().__init__()
        self.log = bytearray()
        self.end = 0
        self.placed: dict[int, int] = {}  # append -> its offset

    def _write(self, data) -> int:
        batch = bytearray(data)
        base = self.end
        self.end = assign_offsets(batch, 0, base, 0) + 1
        self.log += batch
        return base

    def place(self, index, base_offset=None):
        if index not in self.placed:
            self.placed[index] = self._write(self.appends[index][0][0][2])
            super().place(index, self.placed[index])

    def release(self, index, base_offset=None):
        self.place(index)
        self.held[index].set_result(AppendResult(self.placed[index], self.placed[index], -1, 0))

    def marker(self, commit) -> int:
        return self._write(build_marker_batch(ControlType.COMMIT if commit else ControlType.ABORT, PID, 0, 0, 1))

    def partition(self, topic, index):
        end = self.end
        log = SimpleNamespace(log_start_offset=0, log_end_offset=end,
                              read=lambda offset, size, bound, min_one_batch: SimpleNamespace(slices=[end],
                                                                                              next_offset=end))
        return SimpleNamespace(log=log, topic_partition=SimpleNamespace(partition=index))

    async def read_slices(self, groups):
        return [memoryview(bytes(self.log))]


async def _replayed(replicas):
    store = OffsetsStore(SETTINGS, FakeTopics(partitions=1), replicas)
    await store.load(lambda group_id, value: None, lambda key, value: None)
    return store


def _state(store):
    committed = store.get("g", "t", 0)
    return (None if committed is None else (committed.offset, committed.record_offset)), store.has_pending("g", "t", 0)


@pytest.mark.parametrize("commit", [True, False])
async def test_a_marker_written_before_the_txn_offset_commits_batch_leaves_it_pending_as_a_replay_does(commit):
    """The offsets are pending from before their append; a marker of their producer landing in the log
    ahead of their batch settled them in memory, while a replay (Kafka's too) sees the marker first and
    leaves the batch pending until a later marker: after a restart they were pending again, or committed
    where memory had dropped them."""
    replicas = LoggedReplicas()
    store = OffsetsStore(SETTINGS, FakeTopics(partitions=1), replicas)
    task = asyncio.create_task(store.commit_transactional("g", {("t", 0): offset(5)}, PID, 0))
    await replicas.wait_for(1)
    store.transaction_completed(0, PID, commit, replicas.marker(commit))  # at 0, the batch not in the log yet
    replicas.release(0)  # at 1
    await task
    assert _state(store) == _state(await _replayed(replicas)) == (None, True)
    store.transaction_completed(0, PID, True, replicas.marker(True))  # the next transaction's commit, at 2
    assert _state(store) == _state(await _replayed(replicas)) == ((5, 1), False)


async def test_a_marker_reported_before_the_batch_says_where_it_went_settles_it_by_the_log_order():
    """The data path may tell the marker before the batch's offset (a flush awaited between): the store
    keeps the marker until the offset is known, then applies it only if it lies after the batch."""
    replicas = HeldReplicas()
    store = OffsetsStore(SETTINGS, FakeTopics(partitions=1), replicas)
    task = asyncio.create_task(store.commit_transactional("g", {("t", 0): offset(5)}, PID, 0))
    await replicas.wait_for(1)
    store.transaction_completed(0, PID, True, 11)
    replicas.release(0, 10)
    await task
    assert _state(store) == ((5, 10), False)


async def test_a_commit_marker_stores_the_offsets_at_once_though_the_commits_task_has_not_resumed():
    """The batch is in the log and replicated, its marker after it reported: until the commit's task
    resumed (one step of the event loop at least) an OffsetFetch still read the old offset."""
    replicas = LoggedReplicas()
    store = OffsetsStore(SETTINGS, FakeTopics(partitions=1), replicas)
    task = asyncio.create_task(store.commit_transactional("g", {("t", 0): offset(5)}, PID, 0))
    await replicas.wait_for(1)
    replicas.release(0)  # at 0: acknowledged, the task not resumed yet
    store.transaction_completed(0, PID, True, replicas.marker(True))
    assert _state(store) == ((5, 0), False)
    await task
    assert _state(store) == _state(await _replayed(replicas)) == ((5, 0), False)


async def _reload(store, replicas):
    """The partition's role changed with this broker still its leader (a leader epoch bump): unloaded
    and replayed at once, as the registry's coordinator partitions do."""
    store.forget_group("g")
    store.forget_pending(0)
    await store.load_partition(replicas.partition(OFFSETS_TOPIC, 0), lambda group_id, value: None,
                               lambda key, value: None)


async def test_a_txn_offset_commit_whose_partition_was_reloaded_during_its_append_is_not_coordinator():
    """Its pending entries went with the unload, the replay ran before its batch was in the log: it was
    answered NONE and its commit marker stored nothing (OffsetFetch read the old offset until a reload)."""
    replicas = LoggedReplicas()
    store = OffsetsStore(SETTINGS, FakeTopics(partitions=1), replicas)
    task = asyncio.create_task(store.commit_transactional("g", {("t", 0): offset(5)}, PID, 0))
    await replicas.wait_for(1)
    await _reload(store, replicas)
    replicas.release(0)  # at 0, after the replay's end
    store.transaction_completed(0, PID, True, replicas.marker(True))
    with pytest.raises(GroupError) as refused:
        await task
    assert refused.value.error_code == ErrorCode.NOT_COORDINATOR
    assert _state(store) == (None, False)  # the client retries; a later reload finds the batch committed
    assert _state(await _replayed(replicas)) == ((5, 0), False)


async def test_an_offset_commit_whose_partition_was_unloaded_during_its_append_is_not_coordinator():
    """Led elsewhere now: the commit stored its offset in memory anyway, for a group not coordinated here."""
    replicas = HeldReplicas()
    store = OffsetsStore(SETTINGS, FakeTopics(partitions=1), replicas)
    task = asyncio.create_task(store.commit("g", {("t", 0): offset(5)}))
    await replicas.wait_for(1)
    store.forget_group("g")
    store.forget_pending(0)
    replicas.release(0, 10)
    with pytest.raises(GroupError) as refused:
        await task
    assert refused.value.error_code == ErrorCode.NOT_COORDINATOR
    assert store.get("g", "t", 0) is None
