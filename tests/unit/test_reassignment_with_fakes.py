"""Reassignments (broker/cluster/reassignment.py) need only the store, the topics and a way to change a
partition's state: here a real embedded store and small fakes."""

import asyncio
import uuid
from dataclasses import replace

from broker.cluster.layout import DeleteTopicsTopicZNode
from broker.cluster.partition_state import PartitionState
from broker.cluster.reassignment import Reassignments
from broker.cluster.store import EmbeddedStore
from broker.topic import Topic
from protocol.errors import ErrorCode


class FakeTopics:
    def __init__(self, topic: Topic) -> None:
        self.topic = topic
        self.written: list[tuple[str, int, list[int], list[int], list[int]]] = []

    def all(self) -> list[Topic]:
        return [self.topic]

    def get(self, name: str) -> Topic | None:
        return self.topic if name == self.topic.name else None

    async def write_partition_assignment(self, name: str, partition: int, replicas: list[int],
                                         adding: list[int], removing: list[int]) -> None:
        self.written.append((name, partition, list(replicas), list(adding), list(removing)))
        await asyncio.sleep(0)  # a store write yields to the loop
        topic = self.topic
        self.topic = replace(topic, replicas={**topic.replicas, partition: list(replicas)},
                             adding={p: a for p, a in {**topic.adding, partition: adding}.items() if a},
                             removing={p: r for p, r in {**topic.removing, partition: removing}.items() if r})


def _moving_topic() -> Topic:
    """t-0 moves from [1, 2] to [1, 3]; broker 3 never caught up (it is gone)."""
    return Topic("t", uuid.uuid4(), {0: [1, 3, 2]}, states={0: PartitionState(1, 4, (1, 2), 3)},
                 adding={0: [3]}, removing={0: [2]})


async def _reassignments(tmp_path, topic: Topic, alive: list[int]):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    topics = FakeTopics(topic)

    async def change_partition(name, partition, decide):
        current = topics.topic.states[partition]
        decided = decide(current)
        await asyncio.sleep(0)  # a conditional store write yields to the loop
        if decided is None:
            return False
        topics.topic = replace(topics.topic, states={**topics.topic.states, partition: decided})
        return True

    return store, topics, Reassignments(store, topics, alive_ids=lambda: alive,
                                        change_partition=change_partition, wake=lambda: None)


async def test_a_move_of_a_topic_marked_for_deletion_can_be_cancelled(tmp_path):
    store, topics, reassignments = await _reassignments(tmp_path, _moving_topic(), [1, 2])
    await store.create(DeleteTopicsTopicZNode.path("t"), makepath=True)

    moved = await reassignments.alter("t", 0, [2, 1])
    assert moved.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and "marked for deletion" in str(moved.message)

    cancelled = await reassignments.alter("t", 0, None)
    assert cancelled.error_code == ErrorCode.NONE, cancelled.message
    assert topics.written == [("t", 0, [1, 2], [], [])]
    assert not topics.topic.moving  # the deletion, halted while it moved, can resume
    await store.close()


def _shrinking_topic() -> Topic:
    """t-0 moves from [1, 2, 3] to [1, 2]: its target is in the ISR, so the next round finishes it."""
    return Topic("t", uuid.uuid4(), {0: [1, 2, 3]}, states={0: PartitionState(1, 4, (1, 2, 3), 3)},
                 removing={0: [3]})


def _target(topic: Topic) -> list[int]:
    return [r for r in topic.replicas[0] if r not in topic.removing.get(0, [])]


async def test_a_round_finishing_a_move_does_not_overwrite_a_newer_target_asked_meanwhile(tmp_path):
    store, topics, reassignments = await _reassignments(tmp_path, _shrinking_topic(), [1, 2, 3])
    finished, moved = await asyncio.gather(reassignments.advance(), reassignments.alter("t", 0, [1, 3]))
    assert finished == 1 and moved.error_code == ErrorCode.NONE
    assert _target(topics.topic) == [1, 3]  # the newer target, asked after the round began, holds
    await store.close()


async def test_a_round_that_looked_before_a_new_target_was_written_leaves_it_alone(tmp_path):
    store, topics, reassignments = await _reassignments(tmp_path, _shrinking_topic(), [1, 2, 3])
    moved, finished = await asyncio.gather(reassignments.alter("t", 0, [1, 3]), reassignments.advance())
    assert moved.error_code == ErrorCode.NONE and finished == 0
    assert _target(topics.topic) == [1, 3] and topics.topic.removing == {0: [2]}
    assert topics.topic.states[0].isr == (1, 2, 3)  # the round did not drop 3 from the ISR either
    await store.close()


async def test_a_move_written_as_the_topic_is_marked_for_deletion_is_undone(tmp_path):
    """DeleteTopics marks the topic between the reassignment's check of the mark and its write: brokers
    that saw the mark first may have dropped the topic, so the write is undone and the request refused
    as if the mark had been there (docs/cluster.md)."""
    topic = Topic("t", uuid.uuid4(), {0: [1, 2]}, states={0: PartitionState(1, 4, (1, 2), 3)})
    store, topics, reassignments = await _reassignments(tmp_path, topic, [1, 2, 3])
    write = topics.write_partition_assignment

    async def marked_meanwhile(*args):
        if not await store.exists(DeleteTopicsTopicZNode.path("t")):
            await store.create(DeleteTopicsTopicZNode.path("t"), makepath=True)  # DeleteTopics, elsewhere
        await write(*args)

    topics.write_partition_assignment = marked_meanwhile
    moved = await reassignments.alter("t", 0, [1, 3])
    assert moved.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and "marked for deletion" in str(moved.message)
    assert topics.written == [("t", 0, [1, 3, 2], [3], [2]), ("t", 0, [1, 2], [], [])]
    assert topics.topic.replicas == {0: [1, 2]} and not topics.topic.moving  # the deletion goes on
    await store.close()
