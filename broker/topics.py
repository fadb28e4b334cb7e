"""Topics: names, ids, partition assignments and configs, kept in the metadata store.

The store holds the truth (Kafka's ZooKeeper layout); `TopicManager` caches it and keeps the local
logs in step: creating a topic creates its partition logs, deleting one renames them away for
asynchronous removal. The topic itself, its name rules and TopicError are in topic.py, reading
the store in topic_store.py, where replicas go in topic_placement.py.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping

import structlog

from broker.aio import KeyedLocks, uncancellable
from broker.cluster.layout import (
    ConfigEntityZNode,
    ConfigType,
    DeleteTopicsTopicZNode,
    PartitionStateZNode,
    TopicAssignment,
    TopicZNode,
    topic_paths,
)
from broker.cluster.partition_state import PartitionState
from broker.cluster.store import BadVersion, MetadataStore, NodeExists, NoNode, StoreWriteFailed
from broker.config import BrokerConfig
from broker.deletion_retries import DeletionRetries
from broker.dynamic_config import DynamicBrokerConfig
from broker.log.checkpoint import topic_id_to_str
from broker.log.common import StorageError, TopicPartition
from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.resolve_generation import RESOLVE_GENERATION
from broker.topic import (
    Topic,
    collision_key,
    new_topic_id,
    storage_failures_answered,
    validate_topic_name,
)
from broker.topic_configs import STORED_ONLY_DEFAULTS, InvalidConfig, validate_overrides
from broker.topic_placement import Charge, TopicError, assign_replicas, grown_partitions
from broker.topic_store import pending_deletions, read_configs, read_topic, topic_names
from protocol.errors import ErrorCode
from protocol.wire import MAX_SHORT_STRING_BYTES, fits_short_string

log = structlog.get_logger("topics")

# Kafka topic configs that Ebb stores and lists but whose behaviour is not implemented here; they are
# accepted so tools that set them keep working. The table with types, checks and documentation is
# broker/topic_configs.py; docs/features.md lists them.
STORED_ONLY_CONFIGS = STORED_ONLY_DEFAULTS
# Config changes after which the topic's logs run a retention pass at once.
RETENTION_CONFIGS = frozenset({"retention.ms", "retention.bytes", "retention.min.timestamp", "cleanup.policy"})


class TopicManager:
    def __init__(self, store: MetadataStore, logs: LogManager, config: BrokerConfig,
                 dynamic_config: DynamicBrokerConfig, *,
                 brokers: Callable[[], dict[int, str | None]] | None = None, controlled_deletion: bool = False):
        self.store = store
        self.logs = logs
        self.config = config
        self.dynamic_config = dynamic_config  # the broker-wide topic defaults in force
        self._topics: dict[str, Topic] = {}
        # Moves whenever a topic appears, goes or changes its partitions: readers cache what they derive.
        self.changes = 0
        self._by_id: dict[uuid.UUID, Topic] = {}
        # One change at a time per topic (create, delete, add partitions, configs); topics whose names
        # collide ('a.b' and 'a_b') share one, so the collision check cannot race. Other topics go on.
        self._locks = KeyedLocks()
        self.config_listeners: list[Callable[[Topic], None]] = []  # called after a topic's configs change
        # Called with a topic's name as its deletion begins here, before its logs go: whoever holds state
        # of its partitions (the replicas, the per-topic counters) lets it go, as Kafka drops their metrics.
        self.deletion_listeners: list[Callable[[str], None]] = []
        # The brokers new replicas may go to, with their racks: this one alone, or the alive ones in a cluster.
        self.brokers: Callable[[], dict[int, str | None]] = brokers or (lambda: {config.node_id: config.rack})
        # In a cluster a deletion is finished by the controller, not by the broker that marks it.
        self.controlled_deletion = controlled_deletion
        self.deletion_retries = DeletionRetries(self._finish_marked_deletion, (StorageError, StoreWriteFailed))

    # --- reading -----------------------------------------------------------------------------------

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return [self._topics[name] for name in sorted(self._topics)]

    def log_config_for(self, configs: Mapping[str, str]) -> LogConfig:
        """A topic's effective log config: its overrides on top of the broker-wide defaults."""
        return LogConfig.from_properties({k: v for k, v in configs.items() if k not in STORED_ONLY_CONFIGS},
                                         base=self.dynamic_config.topic_defaults)

    async def topic_defaults_changed(self, old: LogConfig, new: LogConfig) -> None:
        """The broker-wide defaults changed (a dynamic broker config): every topic's log config is derived
        again and pushed to its logs; where retention became stricter, a retention pass runs at once."""
        self.logs.default_log_config = new
        retention_changed = any(getattr(old, f) != getattr(new, f) for f in
                                ("retention_ms", "retention_bytes", "retention_min_timestamp", "cleanup_policy"))
        for topic in self.all():
            async with self._locks.held(collision_key(topic.name)):
                if self._topics.get(topic.name) is not topic:
                    continue  # deleted meanwhile
                topic.log_config = self.log_config_for(topic.configs)
                self.logs.topic_configs[topic.name] = topic.log_config
                for tp in topic.partitions():
                    partition_log = self.logs.get_log(tp)
                    if partition_log is not None:
                        partition_log.config = topic.log_config
            if retention_changed:
                await self._apply_retention(topic)
            for listener in self.config_listeners:
                listener(topic)

    # --- start-up ----------------------------------------------------------------------------------

    async def load(self) -> None:
        """Read every topic from the store, and give the log manager each topic's log config (before
        it loads the partitions)."""
        names = await topic_names(self.store)
        marked = set(await pending_deletions(self.store)) if self.controlled_deletion else set()
        for name in names:
            topic = await read_topic(self.store, name, self.log_config_for)
            # A cluster's marked topic is being deleted: never served again, unless its deletion halts
            # while partitions of it move (broker/cluster/deletion.py).
            if name not in marked or topic.moving:
                self._remember(topic)
        self.logs.topic_configs.update({name: topic.log_config for name, topic in self._topics.items()})

    async def reconcile(self) -> None:
        """After the logs are loaded: finish interrupted deletions, drop logs of unknown topics, and
        create any missing partition logs."""
        # A full disk must not keep the broker down: what fails here is logged, and retried by the
        # next DeleteTopics, the next start, or the first request that needs the log.
        for name in await pending_deletions(self.store):
            if self.controlled_deletion:
                continue  # the cluster drops it once it watches the marks (broker/cluster/deletion.py)
            log.info("finishing topic deletion interrupted by a stop", topic=name)
            if not await self._tolerating_storage_failures(self._delete(name), "topic deletion", topic=name):
                self.deletion_retries.schedule(name)
        for tp, partition_log in list(self.logs.logs.items()):
            topic = self._topics.get(tp.topic)
            if topic is None or self.config.node_id not in topic.replicas.get(tp.partition, []):
                log.warning("log of a partition not hosted here scheduled for deletion", partition=str(tp))
                await self._tolerating_storage_failures(self.logs.delete_log(tp), "log deletion", partition=str(tp))
            elif partition_log.topic_id is not None and partition_log.topic_id != topic.topic_id:
                # Left by a topic deleted (and created again) while this broker was down.
                log.warning("log of an earlier topic of the same name scheduled for deletion", partition=str(tp))
                await self._tolerating_storage_failures(self.logs.delete_log(tp), "log deletion", partition=str(tp))
        for topic in self._topics.values():
            await self._tolerating_storage_failures(self._ensure_logs(topic), "log creation", topic=topic.name)

    @staticmethod
    async def _tolerating_storage_failures(step: Awaitable[object], what: str, **fields: str) -> bool:
        try:
            await step
        except (StorageError, StoreWriteFailed) as exc:
            log.error(f"{what} failed at start-up; left for later", error=str(exc), **fields)
            return False
        return True

    def _changed(self) -> None:
        self.changes += 1
        RESOLVE_GENERATION.bump()

    def _remember(self, topic: Topic) -> None:
        self._changed()
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    async def _ensure_logs(self, topic: Topic) -> None:
        """The logs of the topic's replicas on this broker (every partition on a single broker)."""
        local = [tp for tp in topic.partitions() if self.config.node_id in topic.replicas.get(tp.partition, [])]
        await self.logs.get_or_create_logs(local, topic_id=topic.topic_id, config=topic.log_config)

    async def ensure_local_log(self, topic: Topic, tp: TopicPartition) -> None:
        if self.config.node_id in topic.replicas.get(tp.partition, []):
            await self.logs.get_or_create_log(tp, topic_id=topic.topic_id, config=topic.log_config)

    # --- changes made by other brokers (broker/cluster/cluster.py) ------------------------------------

    async def refresh(self, name: str) -> Topic | None:
        """Read the topic again from the store (created or grown elsewhere); None if it is gone."""
        async with self._locks.held(collision_key(name)):
            marked = await self.store.exists(DeleteTopicsTopicZNode.path(name))
            try:
                fresh = await read_topic(self.store, name, self.log_config_for)
            except NoNode:
                return None
            if marked and not fresh.moving:
                return None  # being deleted (its deletion halts while partitions of it move)
            topic = self._topics.get(name)
            if topic is None or topic.topic_id != fresh.topic_id:
                self._remember(fresh)
                self.logs.topic_configs[name] = fresh.log_config
                topic = fresh
                log.info("topic appeared", topic=name, partitions=len(fresh.replicas))
            else:
                new_states = {p: s for p, s in fresh.states.items() if p not in topic.states}
                # Moved only on a change: a kept Fetch resolve (resolve_generation.py) outlives a no-op
                if ((topic.replicas, topic.adding, topic.removing) != (fresh.replicas, fresh.adding, fresh.removing)
                        or new_states):
                    topic.replicas, topic.adding, topic.removing = fresh.replicas, fresh.adding, fresh.removing
                    topic.states.update(new_states)
                    self._changed()
            return topic

    async def configs_changed(self, name: str) -> None:
        """Another broker altered the topic's configs: read them and push them to the local logs."""
        async with self._locks.held(collision_key(name)):
            topic = self._topics.get(name)
            if topic is None:
                return
            configs = await read_configs(self.store, name)
            if configs is None:
                return
            if configs == topic.configs:
                return
            topic.configs = dict(configs)
            topic.log_config = self.log_config_for(configs)
            self.logs.topic_configs[name] = topic.log_config
            for tp in topic.partitions():
                try:
                    await self.ensure_local_log(topic, tp)  # which sets the new config on it
                except StorageError as exc:
                    log.warning("config not applied to an offline log", partition=str(tp), error=exc.message)
        for listener in self.config_listeners:
            listener(topic)

    # --- changes -----------------------------------------------------------------------------------

    def validate_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        """Check topic config overrides; returns them in canonical text with nulls dropped.
        INVALID_CONFIG with Kafka's wording names the bad key."""
        # DescribeConfigs v0-3 must be able to show every name and value again
        too_long = [k[:100] for k, v in configs.items() if not (fits_short_string(k) and fits_short_string(v))]
        if too_long:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"config names and values are limited to "
                                                       f"{MAX_SHORT_STRING_BYTES} bytes: {', '.join(too_long)}")
        try:
            clean = validate_overrides({k: v for k, v in configs.items() if v is not None},
                                       small_segments=self.config.small_segments_enable)
            self.log_config_for(clean)
        except InvalidConfig as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        except (ValueError, TypeError) as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid topic config: {exc}") from None
        return clean

    @uncancellable
    @storage_failures_answered
    async def create(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str | None] | None = None,
                     assignments: Mapping[int, list[int]] | Iterable[tuple[int, list[int]]] | None = None,
                     validate_only: bool = False, charge: Charge | None = None) -> Topic:
        """Create a topic, checking in Kafka's order: name, existence, configs, then partitions and
        replicas. -1 partitions or replication factor means the broker default (KIP-464). `charge`
        takes its partitions from the client's mutation quota once every check passed (validate_only
        too, as Kafka's controller)."""
        async with self._locks.held(collision_key(name)):
            validate_topic_name(name)
            collision = self._collision(name)
            if collision:
                raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {collision}")
            if name in self._topics:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            if await self.store.exists(DeleteTopicsTopicZNode.path(name)):
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion.")
            # The store too: another broker may have created it since this one last looked (its watch not here
            # yet), and its configs must not be written over. Two creations still racing past this check are
            # told apart by the assignment's create below; the later one's configs then stand (as in
            # ZooKeeper-era Kafka, which wrote them in the same order).
            if await self.store.exists(TopicZNode.path(name)):
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            nulls = [key for key, value in (configs or {}).items() if value is None]
            if nulls:
                raise TopicError(ErrorCode.INVALID_CONFIG,
                                 f"Null value not supported for topic configs: {','.join(nulls)}")
            clean = self.validate_configs(configs or {})
            replicas = assign_replicas(num_partitions, replication_factor, assignments, self.brokers(),
                                       self.config.num_partitions, self.config.default_replication_factor)
            if charge is not None:
                charge(len(replicas))
            topic = Topic(name, new_topic_id(), replicas, clean, self.log_config_for(clean))
            topic.states = {p: PartitionState.initial(r) for p, r in replicas.items()}
            if validate_only:
                return topic
            await self.store.put(ConfigEntityZNode.path(ConfigType.TOPIC, name), ConfigEntityZNode.encode(clean))
            try:
                await self.store.create(TopicZNode.path(name),
                                        TopicZNode.encode(TopicAssignment(topic.topic_id, replicas)))
            except NodeExists:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
            await self.store.put_many({PartitionStateZNode.path(name, p): PartitionStateZNode.encode(state)
                                       for p, state in topic.states.items()})
            self._remember(topic)
            await self._ensure_logs(topic)
            log.info("created topic", topic=name, partitions=len(replicas), topic_id=topic_id_to_str(topic.topic_id))
            return topic

    def _collision(self, name: str) -> str | None:
        if "." not in name and "_" not in name:
            return None
        key = collision_key(name)
        return next((t for t in self._topics if t != name and collision_key(t) == key), None)

    @uncancellable
    @storage_failures_answered
    async def add_partitions(self, name: str, count: int, assignments: list[list[int]] | None = None,
                             validate_only: bool = False, charge: Charge | None = None) -> Topic:
        """Grow a topic to `count` partitions (CreatePartitions): the store first, then the new logs.
        The topic's node is read and written back conditionally on its version (retried when another
        writer got in between), so a reassignment's state in it that this broker's watch has not seen
        yet is kept, and two growths never overwrite each other."""
        async with self._locks.held(collision_key(name)):
            path = TopicZNode.path(name)
            while True:
                topic = self._topics.get(name)
                try:
                    data, version = await self.store.get(path)
                except NoNode:
                    topic = None
                if topic is None:
                    raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
                stored = TopicZNode.decode(data)
                if stored.topic_id != topic.topic_id:
                    raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' was re-created meanwhile.")
                new = grown_partitions(name, len(stored.replicas), count, topic.replication_factor,
                                       assignments, self.brokers(), charge=charge)
                charge = None  # a retry after another writer's change is the same request: charged once
                if validate_only:
                    return topic
                grown = TopicAssignment(stored.topic_id, {**stored.replicas, **new}, stored.adding, stored.removing)
                try:
                    await self.store.set(path, TopicZNode.encode(grown), version)
                except BadVersion:
                    continue  # a reassignment step or another growth wrote it since: decide again on it
                break
            new_states = {p: PartitionState.initial(r) for p, r in new.items()}
            await self.store.put_many({PartitionStateZNode.path(name, p): PartitionStateZNode.encode(state)
                                       for p, state in new_states.items()})
            topic.replicas = grown.replicas
            self._changed()
            topic.adding, topic.removing = dict(grown.adding), dict(grown.removing)
            topic.states.update(new_states)
            await self._ensure_logs(topic)
            log.info("added partitions", topic=name, partitions=len(topic.replicas))
            return topic

    async def reassignment_under_way(self, name: str) -> bool:
        """Whether the stored assignment of the topic has a partition moving (read afresh)."""
        try:
            return (await read_topic(self.store, name, self.log_config_for)).moving
        except NoNode:
            return False

    async def write_partition_assignment(self, name: str, partition: int, replicas: list[int],
                                         adding: list[int], removing: list[int]) -> Topic | None:
        """Set one partition's replicas and the reassignment state beside them in the topic's node (the
        controller, broker/cluster/reassignment.py), conditionally on the node's version so that a
        concurrent CreatePartitions is not undone; None if the topic is gone."""
        path = TopicZNode.path(name)
        async with self._locks.held(collision_key(name)):
            while True:
                try:
                    data, version = await self.store.get(path)
                except NoNode:
                    return None
                stored = TopicZNode.decode(data)
                entries = [dict(stored.replicas), dict(stored.adding), dict(stored.removing)]
                for held, value in zip(entries, (replicas, adding, removing), strict=True):
                    held.pop(partition, None)
                    if value:
                        held[partition] = list(value)
                try:
                    await self.store.set(path, TopicZNode.encode(TopicAssignment(stored.topic_id, *entries)), version)
                except BadVersion:
                    continue
                break
            topic = self._topics.get(name)
            if topic is not None:
                topic.replicas[partition] = list(replicas)
                self._changed()
                for held, value in ((topic.adding, adding), (topic.removing, removing)):
                    held.pop(partition, None)
                    if value:
                        held[partition] = list(value)
            return topic

    @uncancellable
    @storage_failures_answered
    async def alter_configs(self, name: str, configs: Callable[[dict], Mapping[str, str | None]],
                            validate_only: bool = False) -> Topic:
        """Replace the topic's overrides with `configs(current overrides)`, computed under the topic lock
        (a legacy AlterConfigs ignores the current ones), persist them, and push the new LogConfig to every
        partition log. A change to a retention config runs a retention pass on the topic's logs at once."""
        async with self._locks.held(collision_key(name)):
            topic = self._topics.get(name)
            if topic is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
            clean = self.validate_configs(configs(dict(topic.configs)))
            if validate_only:
                return topic
            changed = {k for k in set(clean) | set(topic.configs) if clean.get(k) != topic.configs.get(k)}
            await self.store.put(ConfigEntityZNode.path(ConfigType.TOPIC, name), ConfigEntityZNode.encode(clean))
            topic.configs = clean
            topic.log_config = self.log_config_for(clean)
            self.logs.topic_configs[name] = topic.log_config
            for tp in topic.partitions():
                try:
                    await self.logs.get_or_create_log(tp, topic_id=topic.topic_id, config=topic.log_config)
                except StorageError as exc:  # an offline log gets the config when it is loaded again
                    log.warning("config not applied to an offline log", partition=str(tp), error=exc.message)
            log.info("altered topic configs", topic=name, configs=clean)
        if changed & RETENTION_CONFIGS:
            await self._apply_retention(topic)
        for listener in self.config_listeners:
            listener(topic)
        return topic

    async def _apply_retention(self, topic: Topic) -> None:
        for tp in topic.partitions():
            try:
                partition_log = self.logs.get_log(tp)
                if partition_log is not None:
                    await self.logs.apply_retention(partition_log)
            except Exception as exc:  # the periodic pass retries; the config change itself stands
                log.warning("retention after a config change failed", partition=str(tp), error=repr(exc))

    @uncancellable
    @storage_failures_answered
    async def delete(self, name: str, charge: Charge | None = None) -> bool:
        """Mark for deletion (the ZooKeeper way, `/admin/delete_topics/<t>`). On one broker the deletion
        follows at once (a crash in between finishes it at start-up): True. In a cluster every broker
        drops its replicas when it sees the mark, at once or when it comes back, and the controller
        removes the topic once all have (broker/cluster/deletion.py): False, still in progress.
        `charge` takes its partitions from the client's mutation quota before it is marked. A cluster's topic
        marked already is gone as far as a deletion goes (Kafka 4.3.1 removes a topic at once), and free."""
        async with self._locks.held(collision_key(name)):
            marker = DeleteTopicsTopicZNode.path(name)
            if name not in self._topics:
                # A deletion a failure left half done is finished now; anything else does not exist.
                if self.controlled_deletion or not await self.store.exists(marker):
                    raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
            elif not self.config.delete_topic_enable:
                raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
            elif self.controlled_deletion and await self.store.exists(marker):  # not dropped here yet, or moving
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' is marked for deletion.")
            else:
                if charge is not None:
                    charge(len(self._topics[name].replicas))
                try:
                    await self.store.create(marker, DeleteTopicsTopicZNode.encode(int(time.time() * 1000)))
                except NodeExists:
                    pass
                if self.controlled_deletion:
                    return False
            try:
                await self._delete(name)
            except (StorageError, StoreWriteFailed):
                self.deletion_retries.schedule(name)  # marked: finished in the background
                raise
            return True

    async def drop(self, name: str) -> None:
        """A cluster broker's part of a deletion (the topic is marked, or already gone from the store):
        stop serving the topic and remove its local logs."""
        async with self._locks.held(collision_key(name)):
            topic = self._topics.pop(name, None)
            self._changed()
            if topic is not None:
                self._by_id.pop(topic.topic_id, None)
            self._deleting(name)
            for tp in list(self.logs.logs):
                if tp.topic == name:
                    await self.logs.delete_log(tp)

    def _deleting(self, name: str) -> None:
        self.logs.forget_topic(name)
        for listener in self.deletion_listeners:
            listener(name)

    async def _delete(self, name: str) -> None:
        """Stop serving the topic, rename its partition directories for removal, then drop it from the
        store. A failure part way leaves the mark: the next DeleteTopics, or the next start, goes on
        from where this one stopped."""
        topic = self._topics.pop(name, None)
        self._changed()
        here = {tp for tp in [*self.logs.logs, *self.logs.offline_partitions] if tp.topic == name}
        self._deleting(name)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
            here.update(topic.partitions())
        for tp in sorted(here, key=lambda tp: tp.partition):
            await self.logs.delete_log(tp)
        for path in topic_paths(name):
            try:
                await self.store.delete(path, recursive=True)
            except NoNode:
                pass
        log.info("deleted topic", topic=name)

    async def _finish_marked_deletion(self, name: str) -> None:
        """What DeletionRetries calls: the marked deletion finished, if it is still marked."""
        async with self._locks.held(collision_key(name)):
            if await self.store.exists(DeleteTopicsTopicZNode.path(name)):
                await self._delete(name)

