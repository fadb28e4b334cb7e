"""The replicas this broker hosts, the purgatories their requests wait in, and producer ids.

Partitions are looked up lazily from the topics and the log manager, so creating or deleting a
topic needs no call into this module: a partition whose topic is gone answers
UNKNOWN_TOPIC_OR_PARTITION, and one whose topic id or log object changed (deleted and created
again) is a new Partition with fresh state.

The data path (append_records, delete_records, make_start_offsets_durable: every write to a
partition and every start offset someone waits for) is this manager's part in data_path.py.

Events wake the purgatories, keyed by TopicPartition: an append wakes fetches (followers read to the
log end), a high watermark move wakes produces with acks=-1 and fetches, a low watermark move wakes
DeleteRecords.

Record data for answers is read by the log package's SliceReader (broker/log/slices.py) on this
manager's thread pool, never blocking the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import structlog

from broker.log import FileSlice, LogManager, StartOffsetReason, StorageError, TopicPartition
from broker.log.file_region import FileRegion
from broker.log.slices import SliceReader
from broker.metrics.data_path import DELETION_CAUSES, DataPathCounters
from broker.purgatory import Purgatory
from broker.replica.data_path import DataPath, TopicLookup
from broker.replica.fetcher import ReplicaFetcher
from broker.replica.partition import Partition, PartitionError
from broker.replica.producer_ids import ProducerIdManager
from broker.replica.producer_state import SNAPSHOT_INTERVAL_MS
from broker.replica.throttle import ReplicationThrottles
from broker.resolve_generation import RESOLVE_GENERATION
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config import ReplicationConfig, TransactionConfig
    from broker.topic import Topic
    from client.security import ClientSecurity

log = structlog.get_logger("replica")

T = TypeVar("T")
IO_THREADS = 4


class HostedTopics(TopicLookup, Protocol):
    """The topics (broker/topics.py's TopicManager), looked up at every use: a topic deleted or
    created again is seen at once."""

    def all(self) -> list[Topic]: ...


class ReplicaCluster(Protocol):
    """The cluster view (broker/cluster/cluster.py), built after the replicas (it holds them) and
    joined to them by `join_cluster`: who is registered, where they listen, ISR changes."""

    def is_alive(self, broker_id: int) -> bool: ...
    def endpoint(self, broker_id: int) -> tuple[str, int] | None: ...
    async def alter_isr(self, partition: Partition, isr: set[int]) -> None: ...


class ReplicaManager(DataPath):
    _topics: HostedTopics

    def __init__(self, node_id: int, topics: HostedTopics, logs: LogManager, producer_ids: ProducerIdManager,
                 replication: ReplicationConfig, transactions: TransactionConfig,
                 inter_broker_security: ClientSecurity | None = None) -> None:
        """`replication`: the replica.* settings (fetchers, ISR expiry, throttle windows);
        `transactions`: when idle producers expire; `inter_broker_security`: how a follower reaches
        its leaders (None: PLAINTEXT)."""
        self.node_id = node_id
        # producer.id.expiration.ms in force: a dynamic broker property, set again when it changes
        self.producer_id_expiration_ms = transactions.producer_id_expiration_ms
        self._producer_expiry_check_s = transactions.producer_id_expiration_check_interval_ms / 1000
        self._topics = topics
        self._logs = logs
        self.producer_ids = producer_ids
        self._replication = replication
        self._inter_broker_security = inter_broker_security
        self.cluster: ReplicaCluster | None = None  # on a single broker: none
        self._partitions: dict[TopicPartition, Partition] = {}
        self.fetches = Purgatory("fetch")
        self.produces = Purgatory("produce")
        self.deletions = Purgatory("delete-records")
        self.counters = DataPathCounters()  # bytes in and out, deletions, ISR changes (the metrics)
        self._executor: ThreadPoolExecutor | None = None
        self._slices: SliceReader | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._fetchers: dict[int, ReplicaFetcher] = {}  # leader broker id -> the fetcher following it
        self._isr_changes: dict[TopicPartition, asyncio.Task[None]] = {}  # at most one in flight each

        def topic_configs(name: str) -> Mapping[str, str] | None:
            topic = topics.get(name)
            return None if topic is None else topic.configs

        self.throttles = ReplicationThrottles(node_id, topic_configs, replication.quota_window_num,
                                              replication.quota_window_size_seconds)
        # Called with a partition whose role here changed (the group coordinator follows its offsets topic).
        self.leadership_listeners: list[Callable[[Partition], None]] = []
        # Called with a partition whose replica this broker dropped (reassigned away, log dir failed, log
        # replaced): the coordinators drop what they loaded from it.
        self.forget_listeners: list[Callable[[TopicPartition], None]] = []

    def join_cluster(self, cluster: ReplicaCluster) -> None:
        """In a cluster, before start(): roles come from the partition states, and leaders ask it for
        ISR changes."""
        self.cluster = cluster

    # --- lifecycle (a broker service) ------------------------------------------------------------

    async def start(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="ebb-replica-io")
        self._slices = SliceReader(self._executor)
        self._logs.retention_listeners.append(self._retention_moved_start)
        self._logs.reload_listeners.append(self._log_reloaded)
        self._logs.deletion_listeners.append(self.counters.deleted)
        # Become leader of everything hosted here now, not at first use: the high watermark of a log
        # recovered after a crash catches up with its log end offset before anyone reads it.
        for topic in self._topics.all():
            for index in topic.replicas:
                try:
                    self.partition_of(topic, index)
                except PartitionError as exc:
                    log.warning("partition not led here", partition=f"{topic.name}-{index}", error=exc.message)
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._snapshot_periodically()))
        self._tasks.append(loop.create_task(self._expire_producers_periodically()))
        if self.cluster is not None:
            self._tasks.append(loop.create_task(self._shrink_isr_periodically()))

    async def stop(self) -> None:
        for fetcher in list(self._fetchers.values()):
            await fetcher.stop()
        self._fetchers.clear()
        tasks = self._tasks + list(self._isr_changes.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._isr_changes.clear()
        self.wake_all()
        await self.write_producer_snapshots()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    async def _snapshot_periodically(self) -> None:
        while True:
            await asyncio.sleep(SNAPSHOT_INTERVAL_MS / 1000)
            try:
                await self.write_producer_snapshots()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("producer state snapshot round failed", error=repr(exc))

    async def _expire_producers_periodically(self) -> None:
        """Kafka's producer-id expiration task: every producer.id.expiration.check.interval.ms."""
        while True:
            await asyncio.sleep(self._producer_expiry_check_s)
            expired = 0
            for tp, partition in list(self._partitions.items()):
                try:
                    expired += partition.expire_producers()
                except Exception as exc:  # one partition's failure must not end expiry for the broker's life
                    log.error("producer id expiration failed", partition=str(tp), error=repr(exc))
            if expired:
                log.info("idle producer ids expired", producers=expired, after_ms=self.producer_id_expiration_ms)

    async def write_producer_snapshots(self) -> int:
        written = 0
        for tp, partition in list(self._partitions.items()):
            if not self.still_hosted(partition):
                # Deleted (maybe re-created under the same name): its state must not land in the
                # directory of a new incarnation.
                if self._partitions.get(tp) is partition:
                    self._forget(tp)
                continue
            if partition.log.offline:
                continue
            written += await partition.write_producer_snapshot()
        return written

    # --- finding partitions ----------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition:
        """The partition led here; PartitionError(UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
        KAFKA_STORAGE_ERROR) otherwise."""
        found = self._topics.get(topic)
        if found is None:
            self._forget(TopicPartition(topic, index))
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist")
        return self.partition_of(found, index)

    def partition_of(self, topic: Topic, index: int) -> Partition:
        """`partition` for a topic already looked up (a Fetch looks each of its topics up once)."""
        tp = TopicPartition(topic.name, index)
        replicas = topic.replicas.get(index)
        if replicas is None:
            self._forget(tp)
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"topic {topic.name!r} has no partition {index}")
        try:
            log_ = self._logs.get_log(tp)
        except StorageError as exc:
            raise PartitionError(ErrorCode.KAFKA_STORAGE_ERROR, exc.message) from None
        if log_ is None:
            # Listed in the metadata but no local replica (yet): Kafka's answer for that.
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{tp} has no replica on this broker")
        partition = self._partitions.get(tp)
        if partition is None or partition.log is not log_ or (partition.topic_id is not topic.topic_id
                                                              and partition.topic_id != topic.topic_id):
            if partition is not None:
                self._forget(tp)
            state = topic.states.get(index) if self.cluster is not None else None
            partition = Partition(self, tp, topic.topic_id, replicas, log_, state)
            # A replica that joined during a reassignment may come to lead it before the move ends: it
            # must not take the leaving replicas back into the ISR either.
            partition.leaving = set(topic.removing.get(index, ()))
            self._partitions[tp] = partition
            RESOLVE_GENERATION.bump()
            if state is not None:
                self.leadership_changed(partition)
        return partition

    def apply_state(self, topic: Topic, index: int) -> None:
        """The cluster's state of a partition changed: take the role it gives this broker's replica."""
        state = topic.states.get(index)
        try:
            partition = self.partition_of(topic, index)
        except PartitionError as exc:
            if exc.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                # Offline (its log dir failed): stop fetching and serving the old role; the reload
                # takes the role the state names then (_log_reloaded).
                self._forget(TopicPartition(topic.name, index))
            return  # no replica here
        if state is None:
            return
        leader, epoch, isr = state.leader, state.leader_epoch, set(state.isr)
        if leader == self.node_id:
            if not partition.is_leader or partition.leader_epoch != epoch:
                partition.make_leader(epoch, isr)
            else:
                partition.isr = isr | {self.node_id}
                partition.maybe_increment_high_watermark()
        elif partition.is_leader or partition.leader_id != leader or partition.leader_epoch != epoch:
            partition.make_follower(leader, epoch, isr)
        else:
            partition.isr = isr

    def still_hosted(self, partition: Partition) -> bool:
        """False once the partition's topic was deleted (or re-created) or its log replaced."""
        topic = self._topics.get(partition.topic_partition.topic)
        if topic is None or topic.topic_id != partition.topic_id:
            return False
        try:
            return self._logs.get_log(partition.topic_partition) is partition.log
        except StorageError:
            return False

    def wake_all(self) -> int:
        """Answer every parked request now (shutdown: nobody should wait out MaxWaitMs)."""
        return sum(p.complete_all() for p in (self.fetches, self.produces, self.deletions))

    def _forget(self, tp: TopicPartition) -> None:
        """A partition that went away: drop it and let whoever waits on it answer now."""
        self.stop_following(tp)
        if self._partitions.pop(tp, None) is not None:
            RESOLVE_GENERATION.bump()
            for purgatory in (self.fetches, self.produces, self.deletions):
                purgatory.complete_all(tp)
            for listener in self.forget_listeners:
                listener(tp)

    @property
    def partitions(self) -> dict[TopicPartition, Partition]:
        return dict(self._partitions)

    def is_alive(self, broker_id: int) -> bool:
        """Registered in the cluster now (one broker: only this one)."""
        cluster = self.cluster
        return broker_id == self.node_id if cluster is None else cluster.is_alive(broker_id)

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """Where another broker listens, from its registration."""
        cluster = self.cluster
        return None if cluster is None else cluster.endpoint(broker_id)

    # --- leaders and followers -------------------------------------------------------------------

    def leadership_changed(self, partition: Partition) -> None:
        """A partition became leader or follower (or changed leader or epoch): requests parked on it
        check again (theirs now fail NOT_LEADER_OR_FOLLOWER, the other partitions of the same request
        keep waiting), and it is fetched from its new leader, if any."""
        tp = partition.topic_partition
        for purgatory in (self.fetches, self.produces, self.deletions):
            purgatory.notify(tp)
        self.stop_following(tp)
        if not partition.is_leader and partition.leader_id >= 0:
            fetcher = self._fetchers.get(partition.leader_id)
            if fetcher is None:
                fetcher = self._fetchers[partition.leader_id] = ReplicaFetcher(
                    self.node_id, partition.leader_id, self.endpoint, self.make_start_offsets_durable,
                    self._replication, self._inter_broker_security, self.throttles.follower)
            fetcher.add(partition)
        for listener in self.leadership_listeners:
            listener(partition)

    def forget_topic(self, name: str) -> None:
        """The topic is being deleted: stop fetching and serving every partition of it, and drop its
        traffic counters (a topic re-created under the name counts from zero, as in Kafka)."""
        for tp in [tp for tp in self._partitions if tp.topic == name]:
            self._forget(tp)
        self.counters.forget_topic(name)

    def assignment_changed(self, tp: TopicPartition, replicas: list[int], leaving: list[int]) -> None:
        """A reassignment changed the partition's replicas: the local replica (if any) learns them."""
        partition = self._partitions.get(tp)
        if partition is not None:
            partition.set_replicas(replicas, leaving)

    def holds_log(self, tp: TopicPartition) -> bool:
        """Whether this broker has a log of the partition (online or not)."""
        return tp in self._logs.logs or tp in self._logs.offline_partitions

    async def drop_replica(self, tp: TopicPartition) -> None:
        """A reassignment moved the partition off this broker: stop serving and following it, and
        delete its log (renamed away at once, removed after file.delete.delay.ms)."""
        self._forget(tp)
        await self._logs.delete_log(tp)

    def stop_following(self, tp: TopicPartition) -> None:
        """No fetcher follows `tp` any more; a fetcher left with nothing to follow stops."""
        for leader_id, fetcher in list(self._fetchers.items()):
            fetcher.remove(tp)
            if not fetcher.partitions:
                del self._fetchers[leader_id]
                task = asyncio.get_running_loop().create_task(fetcher.stop())
                self._tasks.append(task)
                task.add_done_callback(self._forget_task)

    def _forget_task(self, task: asyncio.Task) -> None:
        if task in self._tasks:
            self._tasks.remove(task)

    def request_isr_change(self, partition: Partition, isr: set[int]) -> None:
        """Ask the cluster to record a new ISR for a partition led here (one change in flight per
        partition; a later need is seen again at the next fetch or shrink round)."""
        cluster = self.cluster
        tp = partition.topic_partition
        if cluster is None or tp in self._isr_changes or isr == partition.isr:
            return

        async def change() -> None:
            try:
                before = set(partition.isr)
                await cluster.alter_isr(partition, isr)
                if partition.isr != before:
                    self.counters.isr_changed(before, partition.isr)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("ISR change failed", partition=str(tp), isr=sorted(isr), error=repr(exc))
            finally:
                self._isr_changes.pop(tp, None)

        self._isr_changes[tp] = asyncio.get_running_loop().create_task(change())

    async def _shrink_isr_periodically(self) -> None:
        """Kafka's isr-expiration task: every half of replica.lag.time.max.ms, drop followers that
        have not caught up within it from the ISR of every partition led here."""
        lag_ms = self._replication.lag_time_max_ms
        while True:
            await asyncio.sleep(lag_ms / 2000)
            for partition in list(self._partitions.values()):
                if partition.is_leader:
                    lagging = partition.lagging_replicas(lag_ms)
                    if lagging:
                        log.info("followers out of sync", partition=str(partition.topic_partition),
                                 replicas=sorted(lagging))
                        self.request_isr_change(partition, partition.isr - lagging)

    # --- events ----------------------------------------------------------------------------------

    def appended(self, partition: Partition) -> None:
        self.fetches.notify(partition.topic_partition)

    def high_watermark_moved(self, partition: Partition) -> None:
        self.produces.notify(partition.topic_partition)
        self.fetches.notify(partition.topic_partition)

    def _log_reloaded(self, tp: TopicPartition) -> None:
        """A log back from offline is a new object: its partition takes its role again now (a
        follower fetches again), not at the first request."""
        topic = self._topics.get(tp.topic)
        if topic is not None:
            self.apply_state(topic, tp.partition)

    def _retention_moved_start(self, tp: TopicPartition) -> None:
        partition = self._partitions.get(tp)
        if partition is not None and partition.is_leader:
            self.log_start_offset_moved(partition)

    def records_deleted(self, partition: Partition, reason: StartOffsetReason, records: int, size: int) -> None:
        self.counters.deleted(DELETION_CAUSES.get(reason, reason.name.lower()), records, size)

    def log_start_offset_moved(self, partition: Partition) -> None:
        # parked follower fetches answer at once with the new start (k01_fetch._start_moved)
        self.fetches.notify(partition.topic_partition)
        self.deletions.notify(partition.topic_partition)

    # --- blocking work ---------------------------------------------------------------------------

    async def run_io(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def read_slices(self, groups: Sequence[Sequence[FileSlice]]) -> list[memoryview]:
        """The bytes of each group of file slices (one group per partition): broker/log/slices.py."""
        assert self._slices is not None, "read before start()"
        return await self._slices.read(groups)

    def slices_to_send(self, groups: Sequence[Sequence[FileSlice]],
                       regions: list[FileRegion] | None) -> Awaitable[Sequence[memoryview | FileRegion]]:
        """read_slices, or FileRegions sent from the files where the connection can (`regions` not
        None): broker/log/slices.py. The groups come pinned (PartitionLog.read(pinned=True)): their
        pins go to the regions or are let go by the reader. (The reader's coroutine itself, not one
        around it: once per Fetch.)"""
        assert self._slices is not None, "read before start()"
        if regions is None:
            return self._slices.read_held(groups)
        return self._slices.for_sending(groups, regions)
