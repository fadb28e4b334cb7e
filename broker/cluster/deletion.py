"""Topic deletion in a cluster, the KAFKA-330 way: it survives broker outages and controller failover.

1. DeleteTopics on any broker writes the mark `/admin/delete_topics/<t>` (TopicManager.delete).
2. Every broker watches the marks. For each one it stops serving the topic, renames its replicas'
   logs away (`-delete`, removed after file.delete.delay.ms) and acknowledges with the child
   `/admin/delete_topics/<t>/<node.id>`. A broker that is down does this when it starts again: the
   mark waits for it.
3. The controller watches the marks and their acknowledgements; once every broker of the topic's
   assignment has acknowledged, it removes `/brokers/topics/<t>` and `/config/topics/<t>`, then the
   mark. A new controller goes on from what is in ZooKeeper.
While a partition of the topic is being reassigned (broker/cluster/reassignment.py) the deletion
halts, as KAFKA-330 has it: brokers keep serving the marked topic and acknowledge nothing; when the
reassignment completes (or is cancelled) the assignment changes, and each broker resumes at step 2.
A topic already marked cannot be reassigned. Elections (ElectLeaders) are written at once, so there
is never one in progress for a deletion to wait on.
While the mark exists the name cannot be created again (TOPIC_ALREADY_EXISTS, "marked for
deletion"). DeleteTopics answers when the mark is gone, or REQUEST_TIMED_OUT at its timeout while
the deletion goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog

from broker.aio import wait_for
from broker.cluster.layout import DeleteTopicsTopicZNode, DeleteTopicsZNode, TopicZNode, topic_paths
from broker.cluster.store import NodeExists, NoNode, Watch

if TYPE_CHECKING:
    from broker.cluster.store import MetadataStore

log = structlog.get_logger("deletion")

class TopicDeletions:
    """Every broker's side: drop marked topics here, acknowledge, and tell waiting requests."""

    def __init__(self, store: MetadataStore, node_id: int, *, drop_local: Callable[[str], Awaitable[None]],
                 keep: Callable[[Watch], None], spawn_until_done: Callable[..., asyncio.Task],
                 wake_controller: Callable[[], None], moving: Callable[[str], Awaitable[bool]]) -> None:
        """`drop_local` stops serving a topic here and removes its logs; `keep` holds a watch for the
        cluster view's life; `spawn_until_done` retries work until it succeeds; `wake_controller`
        tells the controller that marks or acknowledgements changed; `moving` tells whether a
        reassignment of the topic is under way."""
        self.store = store
        self.moving = moving
        self.halted: set[str] = set()  # marked, waiting for their partitions to finish moving
        self.node_id = node_id
        self.drop_local = drop_local
        self.keep = keep
        self.spawn_until_done = spawn_until_done
        self.wake_controller = wake_controller
        self.marked: dict[str, Watch | None] = {}  # name -> the watch of its acknowledgements
        # Marked topics this broker has dropped (or is dropping): an assignment change (a reassignment
        # that raced the mark, and its undoing) must not bring them back here.
        self.dropped: set[str] = set()
        # When each name was last dropped (a count over all drops, never reused): `keeps_dropped` forgets a
        # name only if no new mark dropped it again while it asked the store.
        self._drop_count = 0
        self._dropped_at: dict[str, int] = {}
        self._waiters: dict[str, list[asyncio.Future]] = {}

    async def start(self) -> None:
        try:
            await self.store.create(DeleteTopicsZNode.PATH)
        except NodeExists:
            pass
        self.keep(await self.store.watch_children(DeleteTopicsZNode.PATH, self._on_marks))

    def _on_marks(self, children: list[str] | None) -> None:
        names = set(children or [])
        for name in sorted(names - set(self.marked)):
            self.marked[name] = None
            self.spawn_until_done(lambda name=name: self._drop(name), "dropping a deleted topic",
                                          lambda name=name: name in self.marked)
        for name in set(self.marked) - names:
            self.halted.discard(name)
            self.dropped.discard(name)
            self._dropped_at.pop(name, None)
            watch = self.marked.pop(name)
            if watch is not None:
                watch.cancel()
            for waiter in self._waiters.pop(name, []):
                if not waiter.done():
                    waiter.set_result(True)
            log.info("topic deletion finished", topic=name)
        self.wake_controller()

    async def keeps_dropped(self, name: str) -> bool:
        """Whether a topic this broker dropped for its mark must stay dropped: while the mark stands. The
        mark's end reaches `_on_marks` through its own watch, which may run after the topic's assignment
        watch has already reported a topic created again under the name, so the store is asked."""
        while name in self.dropped:
            dropped_at = self._dropped_at.get(name)
            if await self.store.exists(DeleteTopicsTopicZNode.path(name)):
                return True
            if self._dropped_at.get(name) == dropped_at:
                self.dropped.discard(name)
                return False
            # dropped again for a new mark while the store was asked: ask about that one
        return False

    def assignment_changed(self, name: str) -> None:
        """A halted topic's assignment changed: its reassignments may be over, and its deletion resume."""
        if name in self.halted and name in self.marked:
            self.spawn_until_done(lambda: self._drop(name), "dropping a deleted topic",
                                  lambda: name in self.marked)

    async def _drop(self, name: str) -> None:
        if await self.moving(name):  # KAFKA-330: deletion halts while partitions of the topic move
            if name not in self.halted:
                self.halted.add(name)
                log.info("topic deletion halts while partitions of it are being reassigned", topic=name)
            return
        if name in self.halted:
            self.halted.discard(name)
            log.info("no partition of the topic moves any more; its deletion resumes", topic=name)
        log.info("topic marked for deletion; dropping local replicas", topic=name)
        self.dropped.add(name)
        self._drop_count += 1
        self._dropped_at[name] = self._drop_count
        await self.drop_local(name)
        try:
            await self.store.create(DeleteTopicsTopicZNode.acknowledgement_path(name, self.node_id), makepath=False)
        except (NodeExists, NoNode):  # acknowledged before, or the deletion is already over
            pass
        if name in self.marked:
            try:
                self.marked[name] = await self.store.watch_children(
                    DeleteTopicsTopicZNode.path(name), lambda acks: self.wake_controller())
            except NoNode:
                pass

    async def wait_deleted(self, name: str, timeout_ms: int) -> bool:
        """True once the topic's mark is gone (the deletion finished), False at the timeout."""
        if not await self.store.exists(DeleteTopicsTopicZNode.path(name)):
            return True
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(name, []).append(waiter)
        try:
            await wait_for(asyncio.shield(waiter), max(0, timeout_ms) / 1000)
            return True
        except TimeoutError:
            return False
        finally:
            waiting = self._waiters.get(name, [])
            if waiter in waiting:
                waiting.remove(waiter)


async def finish_deletions(store: MetadataStore, log_waiting: dict[str, frozenset[int]]) -> int:
    """The controller's side: remove each marked topic every replica's broker has acknowledged.
    `log_waiting` remembers what was last reported as missing, so a wait is logged once."""
    try:
        names = await store.children(DeleteTopicsZNode.PATH)
    except NoNode:
        return 0
    finished = 0
    for name in names:
        try:
            assignment = TopicZNode.decode((await store.get(TopicZNode.path(name)))[0])
            brokers = {r for replicas in assignment.replicas.values() for r in replicas}
        except NoNode:
            brokers = set()
        try:
            acks = DeleteTopicsTopicZNode.acknowledged(await store.children(DeleteTopicsTopicZNode.path(name)))
        except NoNode:
            continue
        missing = frozenset(brokers - acks)
        if missing:
            if log_waiting.get(name) != missing:
                log_waiting[name] = missing
                log.info("topic deletion waits for brokers", topic=name, brokers=sorted(missing))
            continue
        for path in topic_paths(name):
            try:
                await store.delete(path, recursive=True)
            except NoNode:
                pass
        log_waiting.pop(name, None)
        log.info("topic deleted from the cluster", topic=name, replicas_on=sorted(brokers))
        finished += 1
    return finished
