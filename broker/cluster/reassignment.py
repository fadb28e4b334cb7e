"""Partition reassignment (KIP-455), executed by the controller; kept in ZooKeeper as Kafka kept it.

The state lives in the topic's assignment node `/brokers/topics/<t>` (TopicManager owns the layout):
while partition p moves, `partitions[p]` is every replica it has (the target's first, then the leaving
ones), `adding_replicas[p]` the target's replicas that are joining and `removing_replicas[p]` those
that leave. A new controller reads it there and carries on.

1. Start (AlterPartitionReassignments with a target): the node gets the full replica set with the
   adding and removing lists. Each broker sees the assignment change (broker/cluster/cluster.py): a
   joining one creates an empty log and follows the leader, which answers its first fetch (at 0)
   out of range, so it starts at the leader's log start offset: records deleted before are never
   copied. Its log start offset is durable before its next fetch reports it, and the leader admits
   it to the ISR only once it has reached the high watermark.
2. Each controller round (woken by the ISR changes of moving partitions) finishes the partitions
   whose target is wholly in the ISR: if the leader leaves (or is gone) the first alive in-sync
   replica of the target leads, at leader epoch + 1; the leaving replicas leave the ISR; then the
   node holds the target alone. A broker that is no longer a replica deletes its log.
3. Cancel (Replicas null): the original replicas (all but the adding ones) come back: the state
   loses the adding replicas (a new leader from the original ISR members if the leader was one of
   them; INVALID_REPLICA_ASSIGNMENT if none is in sync), then the node holds the original list; the
   joining brokers delete what they had copied.

A reassignment that only reorders replicas, or only removes in-sync ones, finishes in the next round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.cluster.layout import DeleteTopicsTopicZNode
from broker.cluster.partition_state import PartitionState
from broker.cluster.store import StoreError
from broker.topic_placement import TopicError, validate_manual_assignment
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.store import MetadataStore

log = structlog.get_logger("reassignment")

# Writes the state decide(state) returns, conditionally on its version; True when written.
ChangePartition = Callable[[str, int, Callable[[PartitionState], PartitionState | None]], Awaitable[bool]]


class MovingTopic(Protocol):
    """What a reassignment reads of a topic (topics.py's Topic)."""

    @property
    def name(self) -> str: ...
    @property
    def replicas(self) -> dict[int, list[int]]: ...
    @property
    def adding(self) -> dict[int, list[int]]: ...
    @property
    def removing(self) -> dict[int, list[int]]: ...
    @property
    def states(self) -> dict[int, PartitionState]: ...


class ReassignableTopics(Protocol):
    """The topics (topics.py's TopicManager), which own the assignment node's layout."""

    def all(self) -> Sequence[MovingTopic]: ...
    def get(self, name: str) -> MovingTopic | None: ...
    async def write_partition_assignment(self, name: str, partition: int, replicas: list[int],
                                         adding: list[int], removing: list[int]) -> Any: ...


@dataclass(frozen=True)
class ReassignmentResult:
    error_code: ErrorCode = ErrorCode.NONE
    message: str | None = None


@dataclass(frozen=True)
class Ongoing:
    topic: str
    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]


class Reassignments:
    def __init__(self, store: MetadataStore, topics: ReassignableTopics, *, alive_ids: Callable[[], list[int]],
                 change_partition: ChangePartition, wake: Callable[[], None]) -> None:
        """`wake` asks the controller for a round (which calls `advance`)."""
        self.store = store
        self.topics = topics
        self.alive_ids = alive_ids
        self.change_partition = change_partition
        self.wake = wake
        # alter and _cancel (a request's task) and _finish (the controller's round) all run on the
        # controller: one at a time, so a round never writes over a newer target or a cancel.
        self._lock = asyncio.Lock()

    # --- the requests ----------------------------------------------------------------------------

    async def alter(self, name: str, partition: int, target: list[int] | None,
                    allow_replication_factor_change: bool = True) -> ReassignmentResult:
        async with self._lock:
            return await self._alter(name, partition, target, allow_replication_factor_change)

    async def _alter(self, name: str, partition: int, target: list[int] | None,
                     allow_replication_factor_change: bool) -> ReassignmentResult:
        topic = self.topics.get(name)
        if topic is None:
            return ReassignmentResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
        current = topic.replicas.get(partition)
        if current is None:
            return ReassignmentResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      f"Unable to find partition {name}:{partition}.")
        if target is None:
            # Before the deletion mark: a deletion waits for the topic's moves to end, and cancelling
            # is how a move that cannot finish (its target broker gone) ends.
            return await self._cancel(topic, partition)
        if await self.store.exists(DeleteTopicsTopicZNode.path(name)):
            return ReassignmentResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      f"Topic {name} is marked for deletion; its partitions are not moved.")
        try:
            validate_manual_assignment(list(target), None, self.alive_ids())
        except TopicError as exc:
            return ReassignmentResult(exc.error_code, exc.message)
        removing_now = topic.removing.get(partition, [])
        replication_factor = len([r for r in current if r not in removing_now])
        if not allow_replication_factor_change and len(target) != replication_factor:
            return ReassignmentResult(ErrorCode.INVALID_REPLICATION_FACTOR,
                                      f"The replication factor is changed from {replication_factor} to {len(target)}")
        adding = [r for r in target if r not in current]
        removing = [r for r in current if r not in target]
        before = (list(current), list(topic.adding.get(partition, [])), list(removing_now))
        await self.topics.write_partition_assignment(name, partition, list(target) + removing, adding, removing)
        if await self._marked_since(name):
            # DeleteTopics marked the topic between the check above and this write: brokers that saw
            # the mark first may have dropped the topic already. Undo it, as if refused (a deletion
            # that halted for it resumes on the change).
            await self.topics.write_partition_assignment(name, partition, *before)
            log.info("reassignment undone: the topic was marked for deletion meanwhile",
                     partition=f"{name}-{partition}")
            return ReassignmentResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      f"Topic {name} is marked for deletion; its partitions are not moved.")
        log.info("reassignment started", partition=f"{name}-{partition}", target=target, adding=adding,
                 removing=removing)
        self.wake()  # it may be finished already (nothing to add), or wait for the ISR
        return ReassignmentResult()

    async def _marked_since(self, name: str) -> bool:
        """Whether the topic is marked for deletion now, the move being written. When the store cannot
        say, the move stands as written (brokers that dropped the topic ignore it, broker/cluster/
        cluster.py) rather than be answered as a failure it was not."""
        try:
            return await self.store.exists(DeleteTopicsTopicZNode.path(name))
        except StoreError as exc:
            log.warning("could not check for a deletion mark after writing a move", topic=name, error=repr(exc))
            return False

    async def _cancel(self, topic: MovingTopic, partition: int) -> ReassignmentResult:
        adding, removing = topic.adding.get(partition, []), topic.removing.get(partition, [])
        if not adding and not removing:
            return ReassignmentResult(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                      "No partition reassignment is in progress.")
        original = [r for r in topic.replicas[partition] if r not in adding]
        alive = set(self.alive_ids())
        refused: list[str] = []

        def revert(state: PartitionState) -> PartitionState | None:
            isr = tuple(r for r in state.isr if r in original)
            if not isr:
                refused.append("it would require an unclean leader election")
                return None
            if state.leader in isr and state.leader in alive:
                return replace(state, isr=isr)
            candidates = [r for r in original if r in isr and r in alive]
            if not candidates:
                refused.append("no original in-sync replica is alive to lead")
                return None
            return replace(state, leader=candidates[0], leader_epoch=state.leader_epoch + 1, isr=isr)

        await self.change_partition(topic.name, partition, revert)
        if refused:
            return ReassignmentResult(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                      f"Unable to revert partition assignment for {topic.name}:{partition} "
                                      f"because {refused[-1]}.")
        await self.topics.write_partition_assignment(topic.name, partition, original, [], [])
        log.info("reassignment cancelled", partition=f"{topic.name}-{partition}", replicas=original)
        return ReassignmentResult()

    def ongoing(self, asked: dict[str, list[int]] | None) -> list[Ongoing]:
        """The reassignments under way, of the asked partitions (None: all)."""
        found = []
        for topic in self.topics.all():
            if asked is not None and topic.name not in asked:
                continue
            for partition in sorted(set(topic.adding) | set(topic.removing)):
                if asked is None or partition in asked[topic.name]:
                    found.append(_ongoing(topic, partition))
        return found

    def _entry(self, name: str, partition: int) -> Ongoing | None:
        """The partition's reassignment as the topic holds it now; None if none is under way."""
        topic = self.topics.get(name)
        if topic is None or (partition not in topic.adding and partition not in topic.removing):
            return None
        return _ongoing(topic, partition)

    # --- the controller's rounds ----------------------------------------------------------------

    async def advance(self) -> int:
        """Finish every reassignment whose target has caught up; returns how many finished."""
        finished = 0
        for moving in self.ongoing(None):
            if await self._finish(moving):
                finished += 1
        return finished

    async def _finish(self, moving: Ongoing) -> bool:
        async with self._lock:
            if self._entry(moving.topic, moving.partition) != moving:
                return False  # cancelled or given a new target since the round looked: the next round acts
            return await self._complete(moving)

    async def _complete(self, moving: Ongoing) -> bool:
        target = [r for r in moving.replicas if r not in moving.removing]
        alive = set(self.alive_ids())
        ready: list[bool] = []

        def complete(state: PartitionState) -> PartitionState | None:
            ready.clear()
            if not set(target) <= set(state.isr):
                return None  # still catching up
            new_isr = tuple(r for r in state.isr if r in target)
            if state.leader in target and state.leader in alive:
                ready.append(True)
                return None if new_isr == state.isr else replace(state, isr=new_isr)
            candidates = [r for r in target if r in new_isr and r in alive]
            if not candidates:
                return None  # nobody of the target can lead yet
            ready.append(True)
            return replace(state, leader=candidates[0], leader_epoch=state.leader_epoch + 1, isr=new_isr)

        written = await self.change_partition(moving.topic, moving.partition, complete)
        if not ready or (not written and self._state_needs_write(moving, target)):
            return False
        await self.topics.write_partition_assignment(moving.topic, moving.partition, target, [], [])
        log.info("reassignment completed", partition=f"{moving.topic}-{moving.partition}", replicas=target)
        return True

    def _state_needs_write(self, moving: Ongoing, target: list[int]) -> bool:
        """After an unwritten decision: whether the cached state still has leaving replicas in it."""
        topic = self.topics.get(moving.topic)
        state = None if topic is None else topic.states.get(moving.partition)
        if state is None:
            return True
        return state.leader not in target or any(r not in target for r in state.isr)



def _ongoing(topic: MovingTopic, partition: int) -> Ongoing:
    return Ongoing(topic.name, partition, list(topic.replicas[partition]), list(topic.adding.get(partition, [])),
                   list(topic.removing.get(partition, [])))
