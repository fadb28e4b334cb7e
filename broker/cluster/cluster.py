"""This broker's view of a cluster on ZooKeeper, kept current by watches.

- Brokers: the children of `/brokers/ids` (ephemeral registrations) are the alive brokers, with the
  endpoint each registered. A broker that goes away stops counting for the low watermark at once.
- Topics: the children of `/brokers/topics`; for each, its assignment node (partitions added), its
  configs (`/config/topics/<t>`, altered through any broker) and each partition's state node
  (`leader`, `leader_epoch`, `isr`, written by the controller and by the partition's leader). Every
  change updates the topic cache the handlers read and gives this broker's replica the role the
  state names: leader, or follower fetching from the leader.
- ISR changes: the leader writes the new ISR itself, conditional on the state node's version (as
  ZooKeeper-era Kafka brokers did); a write that loses to the controller is dropped, and the new
  state arrives through the watch.
- Topic deletion (broker/cluster/deletion.py): marked topics are dropped here and acknowledged.
- The controller (broker/cluster/controller.py) runs here when this broker wins the election.
- Log dir events (broker/cluster/log_dir_events.py): this broker tells the controller when its log
  dir fails and when it is back.

A single broker without ZooKeeper has no Cluster: `broker.cluster` is None.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

import structlog

from broker.cluster.controller import AssignedTopic, AssignedTopics, Controller, LeaderBalancing, NotControllerError
from broker.cluster.deletion import TopicDeletions
from broker.cluster.layout import (
    NO_CONTROLLER,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerRegistration,
    ConfigEntityZNode,
    ConfigType,
    ControllerZNode,
    PartitionStateZNode,
    TopicsZNode,
    TopicZNode,
)
from broker.cluster.log_dir_events import LogDirEvents
from broker.cluster.partition_state import PartitionState
from broker.cluster.store import BadVersion, MetadataStore, NodeExists, NoNode, Watch
from broker.log import TopicPartition

log = structlog.get_logger("cluster")


class ClusterTopic(AssignedTopic, Protocol):
    """What the cluster view reads of a topic (topics.py's Topic); it keeps `states` current."""

    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def replicas(self) -> dict[int, list[int]]: ...
    @property
    def states(self) -> dict[int, PartitionState]: ...
    def partitions(self) -> list[TopicPartition]: ...


class ClusterTopics(AssignedTopics, Protocol):
    """The topics (topics.py's TopicManager), told of what other brokers and the controller changed."""

    def get(self, name: str) -> ClusterTopic | None: ...
    async def refresh(self, name: str) -> ClusterTopic | None: ...
    async def configs_changed(self, name: str) -> None: ...
    async def drop(self, name: str) -> None: ...
    async def ensure_local_log(self, topic: Any, tp: TopicPartition) -> None: ...  # a topic get() gave
    async def reassignment_under_way(self, name: str) -> bool: ...


class LedPartition(Protocol):
    @property
    def topic_partition(self) -> TopicPartition: ...
    @property
    def leader_epoch(self) -> int: ...


class HostedReplicas(Protocol):
    """This broker's replicas (replica/manager.py): they take the roles the partition states name."""

    @property
    def partitions(self) -> Mapping[TopicPartition, Any]: ...
    def log_start_offset_moved(self, partition: Any) -> None: ...  # one of `partitions`
    def apply_state(self, topic: Any, index: int) -> None: ...  # a topic get() gave
    def assignment_changed(self, tp: TopicPartition, replicas: list[int], leaving: list[int]) -> None: ...
    def holds_log(self, tp: TopicPartition) -> bool: ...
    async def drop_replica(self, tp: TopicPartition) -> None: ...


class Cluster:
    def __init__(self, store: MetadataStore, topics: ClusterTopics, replicas: HostedReplicas, node_id: int,
                 leader_balancing: LeaderBalancing, inter_broker_security: Any = None,
                 log_dir_failed: Callable[[], bool] = lambda: False) -> None:
        """`inter_broker_security`: how to reach another broker (the client's ClientSecurity; None:
        PLAINTEXT), for the requests forwarded to the controller. `log_dir_failed`: whether this
        broker's log dir is down now (call `log_dir_events.announce()` when that changes)."""
        self.store = store
        self.inter_broker_security = inter_broker_security
        self.topics = topics
        self.replicas = replicas
        self.node_id = node_id
        self.registrations: dict[int, BrokerRegistration] = {}  # alive broker id -> its registration
        self._member_ids: set[int] = set()  # the children of /brokers/ids as last reported
        self._registration_watches: dict[int, Watch | None] = {}
        self.controller_id = NO_CONTROLLER
        self.controller = Controller(
            store, topics, node_id, leader_balancing, alive_ids=self.alive_ids,
            controller_id=lambda: self.controller_id, state_written=self.note_state_written)
        self.deletions = TopicDeletions(
            store, node_id, drop_local=self._drop_local, keep=self.keep,
            spawn_until_done=self.spawn_until_done, wake_controller=self.controller.wake,
            moving=topics.reassignment_under_way)
        self.log_dir_events = LogDirEvents(store, node_id, dir_failed=log_dir_failed, keep=self.keep,
                                           spawn_until_done=self.spawn_until_done,
                                           wake_controller=self.controller.wake)
        # The newest state version applied, per (topic id, partition): a topic deleted and created again
        # under its name starts its versions over.
        self._state_versions: dict[tuple[uuid.UUID, int], int] = {}
        self._watched_states: set[TopicPartition] = set()
        self._topic_ids: dict[str, uuid.UUID] = {}  # the topic id each name was last seen with
        self._topic_watches: dict[str, list[Watch]] = {}
        self._watches: list[Watch] = []
        self._tasks: set[asyncio.Task] = set()
        # called with the alive ids after each change; the controller acts on every change
        self.broker_listeners: list = [lambda alive: self.controller.wake()]

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Read the brokers and topics and watch them; then stand for controller."""
        for path in (BrokerIdsZNode.PATH, TopicsZNode.PATH):
            try:
                await self.store.create(path)
            except NodeExists:
                pass
        self._watches.append(await self.store.watch_children(BrokerIdsZNode.PATH, self._on_brokers))
        await self._settle()
        self._watches.append(await self.store.watch_children(TopicsZNode.PATH, self._on_topics))
        await self._settle()
        self._watches.append(await self.store.watch_data(ControllerZNode.PATH, self._on_controller))
        await self.deletions.start()
        await self.log_dir_events.start()
        await self.controller.start()

    async def _drop_local(self, name: str) -> None:
        """A topic marked for deletion: stop serving its partitions here and drop its logs (the replicas
        let its partitions go first: TopicManager.deletion_listeners)."""
        await self.topics.drop(name)

    def keep(self, watch: Watch) -> None:
        """A watch that lasts as long as the cluster view (cancelled at stop)."""
        self._watches.append(watch)

    async def stop(self) -> None:
        await self.controller.stop()
        registrations = [w for w in self._registration_watches.values() if w is not None]
        for watch in self._watches + registrations + [w for ws in self._topic_watches.values() for w in ws]:
            watch.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def spawn_until_done(self, make: Callable[[], Awaitable[Any]], what: str,
                         still_wanted: Callable[[], bool] = lambda: True) -> asyncio.Task:
        """Run `make()` until it succeeds (ZooKeeper unreachable for a while, a log dir failing) or is no
        longer wanted, backing off from half a second to ten: a watch event happens once, so the work
        it starts must not be dropped on the first failure."""

        async def run() -> None:
            delay = 0.5
            while still_wanted():
                try:
                    await make()
                    return
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning(f"{what} failed; trying again", error=repr(exc), retry_in_s=delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 10.0)

        return self.spawn(run())

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("cluster metadata update failed", error=repr(task.exception()))

    async def _settle(self) -> None:
        """Wait for the reads that watch callbacks started (start-up wants a complete picture)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # --- requests only the controller serves ---------------------------------------------------

    FORWARDED_CLIENT_ID = "ebb-forwarded"  # a forwarded request is never forwarded again

    async def forward_to_controller(self, body: Any, version: int, timeout_s: float) -> Any:
        """The controller's answer to a request only it can execute (ElectLeaders), sent over the
        inter-broker listener as KRaft brokers forward such requests. NOT_CONTROLLER (retriable) when
        no controller is known or it cannot be reached."""
        from client.connection import BrokerConnection  # the project's client, imported when first needed
        from client.errors import BrokerConnectionError

        controller = self.controller_id
        endpoint = None if controller in (NO_CONTROLLER, self.node_id) else self.endpoint(controller)
        if endpoint is None:
            raise NotControllerError(f"no controller to forward to (controller id {controller})")
        try:
            async with BrokerConnection(endpoint[0], endpoint[1], node_id=controller,
                                        client_id=self.FORWARDED_CLIENT_ID, request_timeout_s=timeout_s,
                                        connect_timeout_s=5,
                                        security=self.inter_broker_security) as connection:
                return await connection.request(body, version=version)
        except (BrokerConnectionError, TimeoutError, OSError) as exc:
            raise NotControllerError(f"controller {controller} could not be reached: {exc!r}") from exc

    # --- brokers ---------------------------------------------------------------------------------

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.registrations

    def alive_ids(self) -> list[int]:
        return sorted(self.registrations)

    def alive_racks(self) -> dict[int, str | None]:
        """The alive brokers and their racks (`broker.rack`, None without one), by id."""
        return {broker_id: self.registrations[broker_id].rack for broker_id in sorted(self.registrations)}

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        found = self.registrations.get(broker_id)
        return None if found is None else (found.host, found.port)

    def _on_brokers(self, children: list[str] | None) -> None:
        ids = {int(c) for c in children or [] if c.isdigit()}
        self._member_ids = ids
        for gone in set(self._registration_watches) - ids:
            watch = self._registration_watches.pop(gone)
            if watch is not None:  # None: still being set up; _watch_registration cancels it when done
                watch.cancel()
        if self.registrations.keys() - ids:
            for gone in self.registrations.keys() - ids:
                del self.registrations[gone]
                log.info("broker left the cluster", broker=gone)
            self._brokers_changed()
        for broker_id in sorted(ids - set(self._registration_watches)):
            self._registration_watches[broker_id] = None
            self.spawn_until_done(functools.partial(self._watch_registration, broker_id),
                                  "watching a broker's registration",
                                  functools.partial(self._registration_watch_wanted, broker_id))

    def _registration_watch_wanted(self, broker_id: int) -> bool:
        """The broker is still a member and its registration watch is not set up yet."""
        return broker_id in self._registration_watches and self._registration_watches[broker_id] is None

    async def _watch_registration(self, broker_id: int) -> None:
        watch = await self.store.watch_data(BrokerIdZNode.path(broker_id),
                                            lambda data, version: self._on_registration(broker_id, data))
        if broker_id in self._registration_watches:
            self._registration_watches[broker_id] = watch
        else:
            watch.cancel()  # left again meanwhile

    def _on_registration(self, broker_id: int, data: bytes | None) -> None:
        """A broker's registration appeared or changed. Its `timestamp` is set when the broker starts, so
        a new one on a node that never went away is a restart the children watch did not see (a broker
        epoch, as KIP-380 has): the controller then treats it as gone and back."""
        if data is None or broker_id not in self._member_ids:
            return
        try:
            found = BrokerIdZNode.decode(data)
        except ValueError:
            log.warning("unreadable broker registration", broker=broker_id)
            return
        before = self.registrations.get(broker_id)
        self.registrations[broker_id] = found
        if before is None:
            log.info("broker in the cluster", broker=broker_id)
        elif before.timestamp != found.timestamp:
            log.warning("broker restarted while its registration stayed", broker=broker_id)
            self.controller.broker_restarted(broker_id)
        else:
            return
        self._brokers_changed()

    def _brokers_changed(self) -> None:
        # The low watermark counts alive replicas only: a broker leaving may complete deletions.
        for partition in self.replicas.partitions.values():
            self.replicas.log_start_offset_moved(partition)
        for listener in self.broker_listeners:
            listener(self.alive_ids())

    def _on_controller(self, data: bytes | None, version: int | None) -> None:
        self.controller_id = ControllerZNode.decode(data)
        self.controller.controller_changed(self.controller_id)
        self.log_dir_events.controller_changed(self.controller_id)

    # --- topics ----------------------------------------------------------------------------------

    def _on_topics(self, children: list[str] | None) -> None:
        names = set(children or [])
        known = set(self._topic_watches)
        for name in known - names:
            for watch in self._topic_watches.pop(name):
                watch.cancel()
            self._watched_states = {tp for tp in self._watched_states if tp.topic != name}
            self.spawn(self.topics.drop(name))
        for name in sorted(names - known):
            self._topic_watches[name] = []
            self.spawn_until_done(functools.partial(self._follow_topic, name), "following a topic",
                                  functools.partial(self._topic_watches.__contains__, name))

    async def _follow_topic(self, name: str) -> None:
        watches = self._topic_watches.get(name)
        if watches is None:
            return
        made: list[Watch] = []
        try:
            made.append(await self.store.watch_data(TopicZNode.path(name),
                                                    lambda data, version: self._on_assignment(name, data)))
            made.append(await self.store.watch_data(ConfigEntityZNode.path(ConfigType.TOPIC, name),
                                                    lambda data, version: self._on_configs(name, data)))
        except BaseException:
            for watch in made:  # the next attempt makes them again
                watch.cancel()
            raise
        watches.extend(made)

    def _on_configs(self, name: str, data: bytes | None) -> None:
        if data is not None:
            self.spawn_until_done(lambda: self.topics.configs_changed(name), "applying topic configs",
                                  lambda: name in self._topic_watches)

    def _on_assignment(self, name: str, data: bytes | None) -> None:
        if data is None:
            return  # deleted: the children watch of /brokers/topics takes it from here
        self.deletions.assignment_changed(name)
        self.spawn_until_done(lambda: self._apply_assignment(name), "reading a topic's assignment",
                              lambda: name in self._topic_watches)

    async def _apply_assignment(self, name: str) -> None:
        if await self.deletions.keeps_dropped(name):
            return  # dropped here for its deletion mark: nothing brings it back while the mark stands
        topic = await self.topics.refresh(name)
        if topic is None:
            return
        watches = self._topic_watches.get(name)
        if watches is None:
            return
        new_incarnation = self._topic_ids.get(name) != topic.topic_id
        self._topic_ids[name] = topic.topic_id
        for tp in topic.partitions():
            if tp not in self._watched_states:
                self._watched_states.add(tp)  # the watch reports the current state at once
                watches.append(await self.store.watch_data(
                    PartitionStateZNode.path(name, tp.partition), functools.partial(self._on_state, tp)))
            elif new_incarnation:
                # Deleted and created again: the watch may have reported the new state before this
                # broker knew the new topic, and ignored it. Read it again.
                try:
                    data, version = await self.store.get(PartitionStateZNode.path(name, tp.partition))
                except NoNode:
                    continue
                self._on_state(tp, data, version)
        await self._replicas_moved(topic)

    async def _replicas_moved(self, topic: ClusterTopic) -> None:
        """After an assignment change (a reassignment, broker/cluster/reassignment.py): a replica that
        joins here starts following, one that stays learns the new replica list, one moved away is
        dropped with its log."""
        for tp in topic.partitions():
            assigned = topic.replicas.get(tp.partition, [])
            if self.node_id in assigned:
                self.replicas.assignment_changed(tp, assigned, topic.removing.get(tp.partition, []))
                if tp not in self.replicas.partitions and tp.partition in topic.states:
                    await self._take_role(topic, tp)
            elif self.replicas.holds_log(tp):
                log.info("replica moved off this broker; deleting its log", partition=str(tp))
                await self.replicas.drop_replica(tp)

    def _version_key(self, tp: TopicPartition) -> tuple[uuid.UUID, int] | None:
        topic = self.topics.get(tp.topic)
        return None if topic is None else (topic.topic_id, tp.partition)

    def _on_state(self, tp: TopicPartition, data: bytes | None, version: int | None) -> None:
        topic = self.topics.get(tp.topic)
        if topic is None or data is None or version is None:
            return
        key = (topic.topic_id, tp.partition)
        if version <= self._state_versions.get(key, -1):
            return  # a write of our own already applied
        state = PartitionStateZNode.decode(data)
        self._state_versions[key] = version
        topic.states[tp.partition] = state
        self._wake_a_reassignment(topic, tp)
        self.spawn_until_done(lambda: self._take_role(topic, tp), "taking a partition's role",
                              lambda: self.topics.get(tp.topic) is topic)

    async def _take_role(self, topic: ClusterTopic, tp: TopicPartition) -> None:
        if self.node_id in topic.replicas.get(tp.partition, []):
            await self.topics.ensure_local_log(topic, tp)
            self.replicas.apply_state(topic, tp.partition)

    def state_version(self, tp: TopicPartition) -> int:
        key = self._version_key(tp)
        return -1 if key is None else self._state_versions.get(key, -1)

    def note_state_written(self, tp: TopicPartition, state: PartitionState, version: int) -> None:
        """A state this broker (or its controller) wrote: cache it before the watch reports it."""
        topic = self.topics.get(tp.topic)
        key = self._version_key(tp)  # None exactly when topic is
        if topic is None or key is None or version <= self._state_versions.get(key, -1):
            return
        self._state_versions[key] = version
        topic.states[tp.partition] = state
        self._wake_a_reassignment(topic, tp)
        if self.node_id in topic.replicas.get(tp.partition, []):
            self.replicas.apply_state(topic, tp.partition)

    def _wake_a_reassignment(self, topic: ClusterTopic, tp: TopicPartition) -> None:
        """A moving partition's state changed: its ISR may now hold the target (the controller acts)."""
        if tp.partition in topic.adding or tp.partition in topic.removing:
            self.controller.wake()

    # --- ISR changes by the leader ---------------------------------------------------------------

    async def alter_isr(self, partition: LedPartition, isr: set[int]) -> None:
        """Write the new ISR of a partition led here, if the state still names this broker leader at
        the partition's epoch and nobody wrote it since we read it."""
        tp = partition.topic_partition
        topic = self.topics.get(tp.topic)
        if topic is None:
            return
        current = topic.states.get(tp.partition)
        if current is None or current.leader != self.node_id or current.leader_epoch != partition.leader_epoch:
            return
        state = replace(current, isr=tuple(sorted(isr)))
        expected = self.state_version(tp)
        if expected < 0:
            return  # not read yet: never write without the version condition
        try:
            version = await self.store.set(PartitionStateZNode.path(tp.topic, tp.partition),
                                           PartitionStateZNode.encode(state), expected)
        except BadVersion:
            log.info("ISR change lost to a newer partition state", partition=str(tp))
            return
        log.info("ISR changed", partition=str(tp), isr=list(state.isr), leader_epoch=partition.leader_epoch)
        self.note_state_written(tp, state, version)
