"""The controller: one broker of the cluster, elected through ZooKeeper, that moves leadership.

Election, as in ZooKeeper-era Kafka: every broker watches `/controller`; when it is missing, each
tries to create it (ephemeral, `{"version": 1, "brokerid": N, "timestamp": ...}`) and the one that
succeeds bumps `/controller_epoch` and takes over. When its session ends the node goes, and the
others elect again.

What the controller does with the brokers it sees alive (the children of `/brokers/ids`):
- a partition whose leader is gone gets a new one: the first replica of the assignment that is alive
  and in the ISR; the leader epoch goes up by one. With none, the leader is -1 (offline) and the ISR
  keeps its last member, so that replica leads again when it comes back; with
  unclean.leader.election.enable (the topic's, else the broker's) the first alive replica of the
  assignment leads instead, alone in the ISR, and records only the lost replicas had are gone;
- dead brokers leave every ISR (the leader re-admits a follower once it has caught up);
- an offline partition whose ISR member returns gets it as leader;
- every leader.imbalance.check.interval.seconds (auto.leader.rebalance.enable): a broker that leads
  more than leader.imbalance.per.broker.percentage fewer of the partitions it is the preferred (first)
  replica of gets them back once it is in sync again (Kafka's auto leader rebalance).
Every write is conditional on the state node's version; one that loses a race is read again and
decided again. The partition state carries the controller epoch that wrote it. It also finishes
topic deletions once every replica's broker has acknowledged them (broker/cluster/deletion.py),
holds the elections operators ask for (ElectLeaders, broker/cluster/elections.py) and carries out
partition reassignments (broker/cluster/reassignment.py), finishing each one in the first round
after its target has caught up. A broker whose log dir failed (broker/cluster/log_dir_events.py)
counts as gone for all of it until it reports the dir back.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from broker.cluster.deletion import finish_deletions
from broker.cluster.elections import ElectionResult, elect_leaders
from broker.cluster.layout import NO_CONTROLLER, ControllerEpochZNode, ControllerZNode, PartitionStateZNode
from broker.cluster.log_dir_events import handle_log_dir_events
from broker.cluster.partition_state import NO_LEADER, PartitionState
from broker.cluster.reassignment import MovingTopic, ReassignableTopics, Reassignments
from broker.cluster.store import BadVersion, NodeExists, NoNode, StoreError
from broker.log import TopicPartition
from protocol.enums import ElectionType
from protocol.errors import ErrorCode, FixedCodeError

if TYPE_CHECKING:
    from broker.cluster.store import MetadataStore

log = structlog.get_logger("controller")


class LeaderBalancing(Protocol):
    """The controller's settings: Kafka's auto.leader.rebalance.enable and leader.imbalance.*."""

    @property
    def auto_leader_rebalance_enable(self) -> bool: ...
    @property
    def leader_imbalance_check_interval_s(self) -> int: ...
    @property
    def leader_imbalance_per_broker_percentage(self) -> int: ...
    @property
    def unclean_leader_election_enable(self) -> bool: ...


class AssignedTopic(MovingTopic, Protocol):
    """What the controller reads of a topic: its replica assignment (and a reassignment of it), its
    partitions' leaders and its unclean.leader.election.enable override (None: the broker's)."""

    def leader(self, partition: int) -> int: ...
    @property
    def unclean_leader_election(self) -> bool | None: ...


class AssignedTopics(ReassignableTopics, Protocol):
    def all(self) -> Sequence[AssignedTopic]: ...
    def get(self, name: str) -> AssignedTopic | None: ...


def prefer(state: PartitionState, replicas: list[int], alive: set[int]) -> PartitionState | None:
    """The state with the preferred (first) replica leading, if it is alive, in sync and not leading."""
    first = replicas[0]
    if state.leader in (NO_LEADER, first) or first not in alive or first not in state.isr:
        return None
    return replace(state, leader=first, leader_epoch=state.leader_epoch + 1)


def elect(state: PartitionState, replicas: list[int], alive: set[int], unclean: bool = False
          ) -> PartitionState | None:
    """The state a partition should have with `alive` brokers, or None when it is right as it is.
    `unclean` (unclean.leader.election.enable): with no in-sync replica alive, the first alive replica
    leads, alone in the ISR; what the lost in-sync replicas acknowledged beyond its log is gone."""
    leader, isr = state.leader, state.isr
    alive_isr = tuple(r for r in isr if r in alive)
    if leader in alive:
        if alive_isr == isr:
            return None
        return replace(state, isr=alive_isr or (leader,))
    candidates = [r for r in replicas if r in alive_isr]
    if candidates:
        return replace(state, leader=candidates[0], leader_epoch=state.leader_epoch + 1, isr=alive_isr)
    out_of_sync = [r for r in replicas if r in alive]
    if unclean and out_of_sync:
        log.warning("unclean leader election: records the lost in-sync replicas acknowledged may be gone",
                    leader=out_of_sync[0], isr_before=list(isr))
        return replace(state, leader=out_of_sync[0], leader_epoch=state.leader_epoch + 1, isr=(out_of_sync[0],))
    if leader == NO_LEADER and isr == isr[:1]:
        return None  # offline, waiting for its last in-sync replica
    # Nobody in sync is alive: offline; keep one ISR member so it leads when it returns.
    return replace(state, leader=NO_LEADER, leader_epoch=state.leader_epoch + 1, isr=isr[:1])


class NotControllerError(FixedCodeError):
    error_code = ErrorCode.NOT_CONTROLLER


class Controller:
    def __init__(self, store: MetadataStore, topics: AssignedTopics, node_id: int, replication: LeaderBalancing, *,
                 alive_ids: Callable[[], list[int]], controller_id: Callable[[], int],
                 state_written: Callable[[TopicPartition, PartitionState, int], Any]) -> None:
        """`alive_ids` and `controller_id` read the cluster view; `state_written` tells it of a
        partition state this controller wrote, before the watch reports it."""
        self.store = store
        self.topics = topics
        self.node_id = node_id
        self.replication = replication
        self.registered_ids = alive_ids
        self.controller_id = controller_id
        self.state_written = state_written
        self.active = False
        self.epoch = 0
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._rebalancing: asyncio.Task | None = None
        self._restarted: set[int] = set()
        self._deletions_waiting: dict[str, frozenset[int]] = {}
        self.dir_failed: set[int] = set()  # brokers whose log dir failed (their replicas are offline)
        self.rounds = 0
        self.reassignments = Reassignments(store, topics, alive_ids=self.alive_ids, change_partition=self._change,
                                          wake=self.wake)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run())
        if self.replication.auto_leader_rebalance_enable:
            self._rebalancing = loop.create_task(self._rebalance_periodically())
        self._wakeup.set()

    async def _rebalance_periodically(self) -> None:
        interval_s = self.replication.leader_imbalance_check_interval_s
        while True:
            await asyncio.sleep(interval_s)
            if not self.active:
                continue
            try:
                await self.rebalance_leaders()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # ZooKeeper trouble: the next check tries again
                log.error("leader rebalance failed", error=repr(exc))

    async def stop(self) -> None:
        tasks = [t for t in (self._task, self._rebalancing) if t is not None]
        self._task = self._rebalancing = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.active:
            self.active = False
            try:
                await self.store.delete(ControllerZNode.PATH)  # hand over at once instead of at session expiry
            except StoreError:  # gone already, or ZooKeeper unreachable: the session's end removes it
                pass

    def broker_restarted(self, broker_id: int) -> None:
        """A broker restarted without its registration being seen gone: its log may be shorter than what
        it led with (a machine crash), so for one round it counts as gone: leadership moves to another
        in-sync replica and it leaves the ISRs, then it comes back as a follower."""
        self._restarted.add(broker_id)
        self.dir_failed.discard(broker_id)  # it reports its dir again if that is still down
        self._wakeup.set()

    def alive_ids(self) -> list[int]:
        """The brokers that can hold leadership and count in an ISR: registered, log dir not failed."""
        return [b for b in self.registered_ids() if b not in self.dir_failed]

    def wake(self) -> None:
        """Something the controller acts on changed (deletion marks or acknowledgements)."""
        self._wakeup.set()

    def controller_changed(self, controller_id: int) -> None:
        if controller_id != self.node_id and self.active:
            log.warning("controllership lost", new_controller=controller_id)
            self.active = False
        self._wakeup.set()

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                if not self.active and self.controller_id() == NO_CONTROLLER:
                    await self._try_to_become_controller()
                if self.active and await handle_log_dir_events(self.store, self.dir_failed):
                    log.warning("brokers with a failed log dir", brokers=sorted(self.dir_failed))
                if self.active:
                    await self.reconcile()
                if self.active:
                    await self.reassignments.advance()
                if self.active:
                    await finish_deletions(self.store, self._deletions_waiting)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # ZooKeeper trouble: try again on the next change or in a second
                log.error("controller round failed", error=repr(exc))
                asyncio.get_running_loop().call_later(1.0, self._wakeup.set)

    async def _try_to_become_controller(self) -> None:
        node = ControllerZNode.encode(self.node_id, int(time.time() * 1000))
        try:
            await self.store.create(ControllerZNode.PATH, node, ephemeral=True)
        except NodeExists:
            return
        self.epoch = await self._bump_epoch()
        self.dir_failed.clear()  # brokers whose dir is still down tell this controller again
        self.active = True
        log.info("became controller", broker=self.node_id, controller_epoch=self.epoch)

    async def _bump_epoch(self) -> int:
        while True:
            try:
                data, version = await self.store.get(ControllerEpochZNode.PATH)
            except NoNode:
                try:
                    await self.store.create(ControllerEpochZNode.PATH, ControllerEpochZNode.encode(1))
                    return 1
                except NodeExists:
                    continue
            epoch = ControllerEpochZNode.decode(data) + 1
            try:
                await self.store.set(ControllerEpochZNode.PATH, ControllerEpochZNode.encode(epoch), version)
                return epoch
            except BadVersion:
                continue

    async def reconcile(self) -> int:
        """Give every partition the leader and ISR the alive brokers call for; returns the changes."""
        restarted, self._restarted = self._restarted, set()
        self.dir_failed &= set(self.registered_ids())  # one that left reports its dir again if it returns
        alive = set(self.alive_ids()) - restarted
        changed = 0
        for topic in self.topics.all():
            unclean = self._unclean_allowed(topic)
            for index, replicas in sorted(topic.replicas.items()):
                if self.active:
                    changed += await self._change_partition(
                        topic.name, index, functools.partial(elect, replicas=replicas, alive=alive, unclean=unclean),
                        alive)
        self.rounds += 1
        if restarted:
            self._wakeup.set()  # the next round counts them alive again: offline partitions may come back
        return changed

    def _unclean_allowed(self, topic: AssignedTopic) -> bool:
        """unclean.leader.election.enable: the topic's override, else the broker's (default false)."""
        override = topic.unclean_leader_election
        return self.replication.unclean_leader_election_enable if override is None else override

    async def rebalance_leaders(self) -> int:
        """Kafka's auto leader rebalance: a broker that leads more than leader.imbalance.per.broker.percentage
        fewer of the partitions it is the preferred (first) replica of gets them back, where it is
        alive and in sync. Returns the partitions moved."""
        alive = set(self.alive_ids())
        preferred: dict[int, list[tuple[str, int, list[int], bool]]] = {}
        for topic in self.topics.all():
            for index, replicas in sorted(topic.replicas.items()):
                leads = topic.leader(index) == replicas[0]
                preferred.setdefault(replicas[0], []).append((topic.name, index, replicas, leads))
        threshold = self.replication.leader_imbalance_per_broker_percentage / 100
        moved = 0
        for broker_id, partitions in sorted(preferred.items()):
            elsewhere = [p for p in partitions if not p[3]]
            if broker_id not in alive or len(elsewhere) / len(partitions) <= threshold:
                continue
            log.info("leaders imbalanced; moving them back to their preferred replica", broker=broker_id,
                     partitions=len(elsewhere), of=len(partitions))
            for name, index, replicas, _ in elsewhere:
                if self.active:
                    moved += await self._change_partition(
                        name, index, functools.partial(prefer, replicas=replicas, alive=alive), alive)
        return moved

    async def elect_leaders(self, election: ElectionType, asked: list[TopicPartition]
                            ) -> dict[TopicPartition, ElectionResult]:
        """An operator's elections (ElectLeaders, broker/cluster/elections.py), on this controller only."""
        self.require_active()
        alive = set(self.alive_ids())

        def assignment(tp: TopicPartition) -> list[int] | None:
            topic = self.topics.get(tp.topic)
            return None if topic is None else topic.replicas.get(tp.partition)

        return await elect_leaders(election, asked, assignment, alive, self._change)

    def require_active(self) -> None:
        if not self.active:
            raise NotControllerError(f"broker {self.node_id} is not the controller")

    async def _change(self, name: str, index: int, decide: Callable[[PartitionState], PartitionState | None]
                      ) -> bool:
        return await self._change_partition(name, index, decide, set(self.alive_ids())) == 1

    async def _change_partition(self, name: str, index: int,
                                decide: Callable[[PartitionState], PartitionState | None], alive: set[int]) -> int:
        """Write `decide(state)` to the partition's state, conditional on the version read; 1 if written."""
        tp = TopicPartition(name, index)
        path = PartitionStateZNode.path(name, index)
        for _ in range(5):
            try:
                data, version = await self.store.get(path)
            except NoNode:
                return 0  # the topic is being created or deleted
            decided = decide(PartitionStateZNode.decode(data))
            if decided is None:
                return 0
            new = replace(decided, controller_epoch=self.epoch)
            try:
                written = await self.store.set(path, PartitionStateZNode.encode(new), version)
            except BadVersion:
                continue  # the leader changed the ISR meanwhile: decide again on what is there now
            except NoNode:
                return 0  # the topic was deleted meanwhile
            log.info("partition state changed", partition=str(tp), leader=new.leader,
                     leader_epoch=new.leader_epoch, isr=list(new.isr), alive=sorted(alive))
            self.state_written(tp, new, written)
            return 1
        log.warning("partition state kept changing; deciding at the next round", partition=str(tp))
        self._wakeup.set()
        return 0
