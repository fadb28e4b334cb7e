"""A broker's log dir failing or coming back, told to the controller: ZooKeeper-era Kafka's
`/log_dir_event_notification`.

Broker side: when the dir fails (an I/O error, broker/log/dir_health.py) the broker writes a
sequential node `/log_dir_event_notification/log_dir_event_<n>` holding Kafka's JSON
(`{"version": 1, "broker": N, "event": 1}`); when its probe has reloaded the dir it writes another
with event 2 (Ebb's: Kafka brings a dir back only by restarting the broker). A new controller
learns a failure the old one had handled from the broker, which writes the event again when it
sees the controller change while its dir is still down.

Controller side: it handles the events in the order they were written, then deletes them (as
Kafka's LogDirEventNotificationHandler does). A broker whose dir failed counts as not there for
leadership: the partitions it leads get a new leader from the rest of the ISR (leader epoch + 1),
and it leaves every ISR, so acks=all goes on with the other replicas. Ebb has one log dir per
broker, so a failed dir is every replica of that broker. Once the dir is back, the broker's
replicas follow the leaders, catch up and the leaders take them back into the ISR; a partition
left offline for want of another in-sync replica gets it as leader again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from broker.cluster.layout import NO_CONTROLLER, LogDirEventNotificationZNode, LogDirEventZNode
from broker.cluster.store import NodeExists, NoNode, Watch

if TYPE_CHECKING:
    from broker.cluster.store import MetadataStore

log = structlog.get_logger("log_dir_events")

_KINDS = {LogDirEventZNode.FAILURE: "failed", LogDirEventZNode.RECOVERY: "recovered"}


class LogDirEvents:
    """This broker's side: announce its dir's state; and wake the controller when events arrive."""

    def __init__(self, store: MetadataStore, node_id: int, *, dir_failed: Callable[[], bool],
                 keep: Callable[[Watch], None], spawn_until_done: Callable[..., asyncio.Task],
                 wake_controller: Callable[[], None]) -> None:
        """`dir_failed` reads this broker's log dir state now; `keep` holds a watch for the cluster
        view's life; `spawn_until_done` retries work until it succeeds."""
        self.store = store
        self.node_id = node_id
        self.dir_failed = dir_failed
        self.keep = keep
        self.spawn_until_done = spawn_until_done
        self.wake_controller = wake_controller
        self._writing = asyncio.Lock()
        self.announced = 0  # events written (a test and log aid)

    async def start(self) -> None:
        try:
            await self.store.create(LogDirEventNotificationZNode.PATH)
        except NodeExists:
            pass
        self.keep(await self.store.watch_children(LogDirEventNotificationZNode.PATH,
                                                  lambda children: self.wake_controller() if children else None))
        if self.dir_failed():  # it failed while the broker started
            self.announce()

    def announce(self) -> None:
        """The dir failed or came back: tell the controller (retried until written)."""
        self.spawn_until_done(self._write, "announcing a log dir event")

    async def _write(self) -> None:
        # One at a time, and each writes the state as it is when written: the last event the
        # controller reads is the dir's latest state, whatever order the triggers came in.
        async with self._writing:
            event = LogDirEventZNode.FAILURE if self.dir_failed() else LogDirEventZNode.RECOVERY
            path = await self.store.create_sequential(LogDirEventZNode.path_prefix(),
                                                      LogDirEventZNode.encode(self.node_id, event))
            self.announced += 1
            log.warning("log dir event written for the controller", kind=_KINDS[event], path=path)

    def controller_changed(self, controller_id: int) -> None:
        """A new controller knows nothing of a failure the old one handled: tell it again."""
        if controller_id != NO_CONTROLLER and self.dir_failed():
            self.announce()


async def handle_log_dir_events(store: MetadataStore, dir_failed: set[int]) -> bool:
    """The controller's side: apply every pending event, in order, to `dir_failed` (the brokers whose
    dir is down) and delete it; True if the set changed."""
    try:
        children = await store.children(LogDirEventNotificationZNode.PATH)
    except NoNode:
        return False
    before = set(dir_failed)
    for child in LogDirEventZNode.in_order(children):
        path = LogDirEventZNode.path(child)
        try:
            data, _ = await store.get(path)
        except NoNode:
            continue
        try:
            broker_id, event = LogDirEventZNode.decode(data)
        except ValueError as exc:
            log.warning("unreadable log dir event dropped", path=path, error=str(exc))
        else:
            if event == LogDirEventZNode.RECOVERY:
                dir_failed.discard(broker_id)
            else:
                dir_failed.add(broker_id)
            log.warning("log dir event", broker=broker_id, kind=_KINDS.get(event, event))
        try:
            await store.delete(path)
        except NoNode:
            pass
    return dir_failed != before
