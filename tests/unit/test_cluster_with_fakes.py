"""The cluster view needs only the store, the topics and the replicas (broker/cluster/cluster.py): here
a real embedded store and small fakes show a partition state reaching the replicas, and the leader's
ISR change written on the version it read."""

import asyncio
import uuid
from dataclasses import dataclass

from broker.cluster.cluster import Cluster
from broker.cluster.layout import DeleteTopicsTopicZNode, PartitionStateZNode
from broker.cluster.partition_state import PartitionState
from broker.cluster.store import EmbeddedStore
from broker.config import ReplicationConfig
from broker.log import TopicPartition
from broker.topic import Topic

TP = TopicPartition("t", 0)


class FakeTopics:
    def __init__(self, topic: Topic) -> None:
        self.topic = topic

    def all(self) -> list[Topic]:
        return [self.topic]

    def get(self, name: str) -> Topic | None:
        return self.topic if name == self.topic.name else None

    async def refresh(self, name: str) -> Topic | None:
        return self.get(name)

    async def configs_changed(self, name: str) -> None:
        pass

    async def drop(self, name: str) -> None:
        pass

    async def ensure_local_log(self, topic: Topic, tp: TopicPartition) -> None:
        pass

    async def reassignment_under_way(self, name: str) -> bool:
        return False

    async def write_partition_assignment(self, name: str, partition: int, replicas: list[int],
                                         adding: list[int], removing: list[int]) -> None:
        raise AssertionError("no reassignment here")


class FakeReplicas:
    def __init__(self) -> None:
        self.partitions: dict = {}
        self.applied: list[tuple[int, PartitionState]] = []

    def log_start_offset_moved(self, partition) -> None:
        pass

    def apply_state(self, topic: Topic, index: int) -> None:
        self.applied.append((index, topic.states[index]))

    def assignment_changed(self, tp: TopicPartition, replicas: list[int], leaving: list[int]) -> None:
        pass

    def holds_log(self, tp: TopicPartition) -> bool:
        return False

    async def drop_replica(self, tp: TopicPartition) -> None:
        raise AssertionError("no replica moves off here")


@dataclass
class LedHere:
    topic_partition: TopicPartition
    leader_epoch: int


async def _cluster(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    topic = Topic("t", uuid.uuid4(), {0: [1, 2]})
    replicas = FakeReplicas()
    return store, topic, replicas, Cluster(store, FakeTopics(topic), replicas, 1, ReplicationConfig())


async def test_a_newer_state_reaches_the_replicas_and_an_older_one_does_not(tmp_path):
    store, topic, replicas, cluster = await _cluster(tmp_path)
    newer, older = PartitionState(2, 5, (2, 1), 3), PartitionState(1, 4, (1, 2), 3)
    cluster.note_state_written(TP, newer, 3)
    cluster.note_state_written(TP, older, 2)
    assert topic.states[0] == newer and replicas.applied == [(0, newer)]
    assert cluster.state_version(TP) == 3
    await store.close()


async def test_the_leader_writes_its_isr_on_the_version_it_read(tmp_path):
    store, topic, replicas, cluster = await _cluster(tmp_path)
    path = PartitionStateZNode.path("t", 0)
    await store.create(path, PartitionStateZNode.encode(PartitionState(1, 4, (1, 2), 3)))
    cluster.note_state_written(TP, PartitionState(1, 4, (1, 2), 3), 0)
    await cluster.alter_isr(LedHere(TP, 4), {1})
    assert PartitionStateZNode.decode((await store.get(path))[0]) == PartitionState(1, 4, (1,), 3)
    assert topic.states[0].isr == (1,) and cluster.state_version(TP) == 1

    await store.set(path, PartitionStateZNode.encode(PartitionState(2, 5, (2,), 4)))  # the controller, unseen
    await cluster.alter_isr(LedHere(TP, 4), {1, 2})
    assert PartitionStateZNode.decode((await store.get(path))[0]) == PartitionState(2, 5, (2,), 4)
    await store.close()


async def test_a_topic_dropped_for_its_deletion_mark_is_not_brought_back_by_an_assignment_change(tmp_path):
    """A reassignment that raced the mark (and its undoing) changes the topic's node after this broker
    dropped the topic: the change is not applied (refresh would make the topic appear again)."""
    store, topic, replicas, cluster = await _cluster(tmp_path)
    refreshed: list[str] = []

    async def refresh(name: str) -> Topic | None:
        refreshed.append(name)
        return topic

    cluster.topics.refresh = refresh
    await store.create(DeleteTopicsTopicZNode.path("t"), DeleteTopicsTopicZNode.encode(0), makepath=True)
    cluster.deletions.marked["t"] = None  # marked, and dropped here
    cluster.deletions.dropped.add("t")
    await cluster._apply_assignment("t")
    assert refreshed == []
    await store.delete(DeleteTopicsTopicZNode.path("t"))
    cluster.deletions._on_marks([])  # the mark is gone (the deletion finished): the name is free again
    cluster._topic_watches["t"] = []
    await cluster._apply_assignment("t")
    assert refreshed == ["t"]
    await store.close()


async def test_a_topic_created_again_is_followed_before_the_marks_watch_reports_the_deletion_over(tmp_path):
    """The mark's end and the new topic's assignment come by separate watches: when the assignment comes
    first, the mark is already gone from the store, and the new topic must not be taken for the dropped
    one (a returning broker never hosted the topic created again under the name)."""
    store, topic, replicas, cluster = await _cluster(tmp_path)
    refreshed: list[str] = []

    async def refresh(name: str) -> Topic | None:
        refreshed.append(name)
        return topic

    cluster.topics.refresh = refresh
    cluster.deletions.marked["t"] = None  # dropped for a mark the store no longer has; _on_marks not run yet
    cluster.deletions.dropped.add("t")
    cluster._topic_watches["t"] = []
    await cluster._apply_assignment("t")
    assert refreshed == ["t"] and "t" not in cluster.deletions.dropped
    await store.close()


async def test_a_new_mark_dropping_the_topic_while_the_old_ones_end_is_asked_keeps_it_dropped(tmp_path):
    """keeps_dropped found the old mark gone, and while it waited for the store a new mark dropped the
    topic again: its discard erased that drop, and an assignment change could bring the topic back."""
    store, topic, replicas, cluster = await _cluster(tmp_path)
    deletions = cluster.deletions
    deletions.dropped.add("t")  # dropped for a mark the store no longer has
    asked, answer = asyncio.Event(), asyncio.Event()
    exists = store.exists

    async def held_exists(path):
        found = await exists(path)
        if not asked.is_set():
            asked.set()
            await answer.wait()
        return found

    store.exists = held_exists
    keeps = asyncio.create_task(deletions.keeps_dropped("t"))
    await asked.wait()
    await store.create(DeleteTopicsTopicZNode.path("t"), DeleteTopicsTopicZNode.encode(0), makepath=True)
    deletions.marked["t"] = None
    await deletions._drop("t")  # the new mark's drop, while the store's answer is on its way
    answer.set()
    assert await keeps and "t" in deletions.dropped
    await store.close()
