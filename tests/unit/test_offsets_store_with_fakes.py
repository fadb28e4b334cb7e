"""The offsets store takes its settings, the topics and the data path in its constructor, so small
fakes stand in for them: a topic table that records creations, a data path that answers each append
with the result a test chooses."""

from dataclasses import dataclass, field

import pytest

from broker.group.group import GroupError
from broker.group.offsets_store import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_CONFIGS,
    OffsetsStore,
    OffsetsTopicSettings,
    partition_for,
)
from broker.replica import AppendOrigin, AppendResult
from broker.topic_placement import TopicError
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

    async def append_records(self, entries, required_acks, timeout_ms, origin, internal_topics_allowed=False):
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
