"""The broker process: wires the metadata store, the logs, the topics and the network together,
and shuts them down in the order that loses nothing (stop accepting, finish requests, checkpoint)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import gc
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import structlog

from broker.client_metrics_configs import ClientMetricsConfigs
from broker.cluster.cluster import Cluster
from broker.cluster.layout import BrokerIdZNode, BrokerRegistration, ClusterIdZNode
from broker.cluster.store import EmbeddedStore, MetadataStore, NodeExists, NoNode
from broker.config import BrokerConfig, ConfigError
from broker.dynamic_config import ControllerSettings, DynamicBrokerConfig
from broker.feature_updates import FeatureUpdater
from broker.features import SUPPORTED, FinalizedFeatures, UnservableLevels, load_finalized
from broker.fetch_sessions import FetchSessionCache
from broker.group import GroupCoordinator
from broker.group.cluster_commits import gather as gather_commits
from broker.group.offsets_store import OFFSETS_TOPIC, OffsetsStore, OffsetsTopicSettings
from broker.group.trim import CommittedTrimmer
from broker.group_configs import GroupConfigs
from broker.handlers import load_handlers
from broker.handlers.fetch_resolve import CHECK_ENV, CHECK_KEPT
from broker.log.checkpoint import topic_id_to_str
from broker.log.common import TopicPartition
from broker.log.manager import LogManager
from broker.metrics.service import MetricSources, MetricsService
from broker.quotas.enforced import ClientQuotas
from broker.quotas.store import ClientQuotaStore
from broker.replica import ReplicaManager
from broker.replica.producer_ids import ProducerIdManager
from broker.replica.throttle import FOLLOWER_RATE, LEADER_RATE
from broker.security.authorizer import Authorizer
from broker.security.credentials import CredentialStore
from broker.server import BrokerServer, StartAborted
from broker.share.coordinator import ShareCoordinator
from broker.share.manager import SharePartitionManager
from broker.share.persister import StatePersister
from broker.topic import INTERNAL_TOPICS
from broker.topics import TopicManager
from broker.txn import TransactionCoordinator
from broker.txn.peers import PeerConnections

if TYPE_CHECKING:
    from broker.cluster.zookeeper import ZooKeeperStore

log = structlog.get_logger("broker")


SLOW_STOP_S = 1.0  # a part of the broker taking longer than this to stop is logged (what a hung stop waits on)


@contextlib.asynccontextmanager
async def _timed_stop(part: str) -> AsyncIterator[None]:
    began = time.monotonic()
    try:
        yield
    finally:
        took = time.monotonic() - began
        if took > SLOW_STOP_S:
            log.warning("a part of the broker was slow to stop", part=part, seconds=round(took, 1))


METADATA_FILE = "ebb-metadata.json"
META_PROPERTIES = "meta.properties"
SHARE_PEER_TIMEOUT_MS = 5000  # a share coordinator's answer (Kafka's request.timeout.ms for its persister)
LOCK_FILE = ".lock"  # as Kafka's: one broker process per log dir
ZOOKEEPER_SESSION_FILE = "zookeeper-session"  # this broker's ZooKeeper session, to end it after a crash


class Broker:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.store: MetadataStore | None = None
        # Set when the broker must stop by itself (a finalized feature level it cannot serve); run() does.
        self.halted = asyncio.Event()
        self.halt_reason: str | None = None
        # Made by start(), which serves requests only once they all exist: handlers (BrokerContext) and
        # the services never see them missing. Until then reading one raises AttributeError.
        self.logs: LogManager
        self.topics: TopicManager
        self.dynamic_config: DynamicBrokerConfig
        self.group_configs: GroupConfigs  # KIP-848's group configs, in the metadata store
        self.client_metrics: ClientMetricsConfigs  # KIP-714's subscriptions, in the metadata store
        self.replicas: ReplicaManager
        self.fetch_sessions: FetchSessionCache  # KIP-227's sessions of consumers and followers
        self.shares: SharePartitionManager  # KIP-932's share-partitions led here and share sessions
        self.share_coordinator: ShareCoordinator  # the share-partition states kept in __share_group_state
        self.groups: GroupCoordinator  # consumer groups and committed offsets
        self.transactions: TransactionCoordinator  # transactional ids and their transactions
        self.features: FinalizedFeatures  # the cluster's finalized feature levels (transaction.version, group.version)
        self.feature_updates: FeatureUpdater  # follows `/feature`; UpdateFeatures where this broker controls
        self.credentials: CredentialStore  # SCRAM credentials (SASL listeners, KIP-554)
        self.client_quotas: ClientQuotaStore  # the cluster's client quotas (KIP-546), in the metadata store
        self.quotas: ClientQuotas  # enforcing them: Produce, Fetch, connections, topic mutations
        self.authorizer: Authorizer | None = None  # ACLs, when authorizer.class.name asks for them
        self.cluster: Cluster | None = None  # the other brokers, leaders and the controller (ZooKeeper only)
        self.server = BrokerServer(self)
        self.cluster_id = ""
        self.started_at_ms = 0
        self._lock_fd: int | None = None
        self._registered = False  # in the store as alive: only once the logs are loaded (start())
        self._logs_loaded = False  # every log loaded and recovered: a failed start closes them cleanly
        self._started: list = []  # services started so far, stopped again by a failed start
        self._metrics: MetricsService | None = None  # the /metrics endpoint (ebb.metrics.listener), bound early
        self._start_ended: asyncio.Event | None = None  # made by start(), set when it returns or raises
        self._abandoned = False  # a start that failed (or was stopped) and undid itself
        # Services started after the topics and stopped before the logs (data path, groups, ...),
        # each with async start() and stop().
        self.services: list = []

    @property
    def node_id(self) -> int:
        return self.config.node_id

    async def start(self) -> None:
        self._start_ended = asyncio.Event()
        try:
            await self._start()
        finally:
            self._start_ended.set()

    async def _start(self) -> None:
        load_handlers()
        config = self.config
        config.log_dir.mkdir(parents=True, exist_ok=True)
        self._lock_log_dir()
        try:
            self.store = await self._open_store()
            self.credentials = CredentialStore(self.store)
            if config.authorizer is not None:
                self.authorizer = Authorizer(self.store, config.authorizer.super_users,
                                             config.authorizer.allow_everyone_if_no_acl_found)
                await self.authorizer.start()
            self.cluster_id = await self._cluster_id()
            self.features = await load_finalized(self.store, config.transactions.transaction_version,
                                                 config.group_version)
            await asyncio.get_running_loop().run_in_executor(None, self._check_meta_properties)
            # A live broker registered with this node.id stops start-up here, before anything shared is changed;
            # the registration itself waits for the logs (below), where one that registered meanwhile is found.
            await self._check_node_id_free()
        except BaseException:
            if self.store is not None:
                await self.store.close()
            self._unlock_log_dir()
            raise
        try:
            await self._load_and_serve()
        except BaseException:
            await self._abandon_start()
            raise
        self.started_at_ms = int(time.time() * 1000)
        log.info("broker started", node_id=config.node_id, cluster_id=self.cluster_id,
                 topics=len(self.topics.all()), **self.logs.previous_stop())
        if CHECK_KEPT:
            log.warning("a test-only check runs a full resolve beside every kept Fetch resolve", env=CHECK_ENV)

    async def _load_and_serve(self) -> None:
        """start() once the metadata store is open: the logs; the listeners bound, holding connections; the
        registration; every service; then the requests served."""
        config = self.config
        store = self._opened_store()
        in_cluster = config.zookeeper_connect is not None
        # Internal topics (committed offsets) keep being written below the free-space threshold.
        # Dynamic broker configs are read before the logs open, so they start with the defaults in force.
        self.dynamic_config = DynamicBrokerConfig(store, config)
        await self.dynamic_config.load()
        self.group_configs = GroupConfigs(store, config.group_config_properties,
                                          intervals=lambda: self.dynamic_config.group_intervals)
        self.client_metrics = ClientMetricsConfigs(store)
        self.client_quotas = ClientQuotaStore(store)
        windows = config.client_quotas
        self.quotas = ClientQuotas(windows.window_num, windows.window_size_seconds,
                                   windows.mutation_window_num, windows.mutation_window_size_seconds)
        self.client_quotas.listeners.append(self.quotas.update)
        self.logs = LogManager(config.log_dir, config=config.log_manager,
                               default_log_config=self.dynamic_config.topic_defaults, reserve_topics=INTERNAL_TOPICS)
        # In a cluster new replicas go to the alive brokers (the Cluster, created below, knows them).
        brokers = self._alive_brokers if in_cluster else None
        self.topics = TopicManager(store, self.logs, config, self.dynamic_config, brokers=brokers,
                                   controlled_deletion=in_cluster)
        self.dynamic_config.topic_defaults_listeners.append(self.topics.topic_defaults_changed)
        await self.topics.load()
        await self.logs.startup()
        self._logs_loaded = True
        await self.topics.reconcile()
        # the data path: partitions, purgatories, producer ids
        self.replicas = ReplicaManager(config.node_id, self.topics, self.logs,
                                       ProducerIdManager(store, config.node_id), config.replication,
                                       self.dynamic_config.transactions, config.inter_broker_security)
        self.fetch_sessions = FetchSessionCache(config.replication.fetch_session_cache_slots)
        # Share-partition state lives in __share_group_state (its coordinator: the leader of the key's partition).
        self.share_coordinator = ShareCoordinator(config, self.topics, self.replicas,
                                                  in_cluster=config.zookeeper_connect is not None)
        self._share_peers = PeerConnections(config.node_id, self.replicas.endpoint, config.inter_broker_security,
                                            SHARE_PEER_TIMEOUT_MS)
        self.shares = SharePartitionManager(self.replicas, StatePersister(self.share_coordinator, config.node_id,
                                                                          self._share_peers))
        self.topics.deletion_listeners.append(self.replicas.forget_topic)
        self.dynamic_config.change_listeners.append(self._throttle_rates_changed)  # in force at once
        self._throttle_rates_changed()
        self.logs.cleaner.producer_last_offsets = self._producer_last_offsets  # kept by the log cleaner
        self.logs.cleaner.last_stable_offset = self._cleaning_bound  # the cleaner stays below open transactions
        self.logs.cleaner.producer_snapshot_offset = self._producer_snapshot_offset
        self.services.insert(0, self.replicas)  # started first, stopped last
        if config.zookeeper_connect is not None:
            # brokers, partition states and roles, the controller election
            # unclean.leader.election.enable can change dynamically: the controller reads it each round
            # and has one at once when it changes (offline partitions may get a leader now).
            self.cluster = Cluster(store, self.topics, self.replicas, config.node_id,
                                   ControllerSettings(config.replication, self.dynamic_config),
                                   config.inter_broker_security, log_dir_failed=lambda: self.logs.health.failed)
            self.replicas.join_cluster(self.cluster)
            # A failed log dir (and its return) is told to the controller, which moves leadership.
            announce = self.cluster.log_dir_events.announce
            self.logs.health.listeners.append(lambda failed: announce())
            self.dynamic_config.unclean_election_listeners.append(self.cluster.controller.wake)
            self.services.insert(1, self.cluster)
        # Replays __consumer_offsets through the replicas; in a cluster it follows their leadership.
        offsets_store = OffsetsStore(OffsetsTopicSettings.of(config), self.topics, self.replicas)
        self._consumer_topics_seen: tuple[int, dict[str, tuple[uuid.UUID, int]]] = (-1, {})
        self.groups = GroupCoordinator(config, offsets_store, self.replicas, in_cluster=self.cluster is not None,
                                       share_topic=self._share_topic, consumer_topics=self._consumer_topics,
                                       member_timeouts=self.group_configs.member_timeouts)
        self.services.append(self.groups)
        self.groups.share.member_left.append(self.shares.member_left)  # a leaving member's records are released
        self.groups.share.initialize_states = self.shares.persister.initialize  # a new share-partition's state
        self.groups.share.initialize_missing = self.shares.persister.initialize_missing  # an older Ebb's group's
        self.groups.share.delete_states = self.shares.forget  # DeleteShareGroupOffsets', DeleteGroups' states
        self.topics.deletion_listeners.append(self.groups.share.topic_deleted)  # record 15 forgets the topic
        # Replays __transaction_state and completes what it left prepared (one broker; see broker/txn/).
        self.transactions = TransactionCoordinator(config, self.topics, self.replicas,
                                                   in_cluster=self.cluster is not None,
                                                   settings=self.dynamic_config.transactions,
                                                   transaction_version=self.features.transaction_version)
        self.dynamic_config.change_listeners.append(self._producer_settings_changed)
        self.transactions.marker_listeners.append(self._offsets_settled)
        self.services.append(self.transactions)
        # The coordinator writes its records and aborts at the level in force: it follows a change at once.
        self.features.listeners.append(self._features_changed)
        self.feature_updates = FeatureUpdater(self._opened_store(), self.features, config.node_id, halt=self._halt)
        self.services.append(self.feature_updates)
        self.services.append(self.share_coordinator)
        self.services.append(self.shares.persister)  # its inter-broker connections close on stop
        # retention.committed.groups; in a cluster it asks the other coordinators for their groups' commits
        ask_coordinators = None if self.cluster is None else \
            functools.partial(gather_commits, self.cluster, config.inter_broker_security)
        self.services.append(CommittedTrimmer(self.groups, self.topics, self.replicas, ask_coordinators,
                                              config.log_manager.retention_check_interval_ms / 1000))
        self.services.append(self.dynamic_config)  # follows changes once every part above can take them
        self.services.append(self.client_quotas)  # read, and followed, before the first request
        if config.metrics_listener is not None:  # last: it reads every part above
            listener = config.metrics_listener
            sources = MetricSources([item.name for item in config.listeners], self.server, self.replicas, self.logs,
                                    self.topics, self.cluster, self.groups, self.fetch_sessions, self.quotas)
            self._metrics = MetricsService(sources, listener.host, listener.port)
            self.services.append(self._metrics)
        # The listeners are bound before the registration makes this broker alive to the controller (and
        # to the clients' Metadata), so that from then on a connection waits instead of being refused; no
        # request is read until every service has started (BrokerServer.bind, serve). The metrics port is
        # taken with them: a port in use stops start-up before the registration, whichever it is.
        await self.server.bind()
        if self._metrics is not None:
            await self._metrics.bind()
        # Registered only now that every log is loaded and recovered (Kafka's ZooKeeper-era order; KRaft keeps
        # a broker fenced until then): until this the controller neither counts it alive nor elects it, and
        # places no new replica on it. Then the services: the Cluster's roles start the follower fetchers.
        await self._register_once_loaded()
        for service in self.services:
            if self.server.stopping:  # stop() while starting: the rest is not started, what is is undone
                raise StartAborted("the broker was stopped while its services started: start-up abandoned")
            await service.start()
            self._started.append(service)
        await self.server.serve()

    async def _abandon_start(self) -> None:
        """start() failed once the store was open (a listener's port in use, the store unreachable while
        registering, a service's start): the listeners close, what started stops, the registration ends,
        and logs that finished loading close cleanly, so the next start does not recover them all again.
        Logs whose load failed part way are left to that recovery."""
        log.warning("start-up failed: stopping what had started")
        self._abandoned = True
        await self.server.stop()  # the bound listeners close: connections they held are reset
        if self._metrics is not None and self._metrics not in self._started:
            await self._metrics.stop()  # bound, not started: its port is let go
        for service in reversed(self._started):
            try:
                await service.stop()
            except Exception as exc:  # the failure that stopped start-up is the one raised
                log.warning("a service failed to stop after a failed start", service=type(service).__name__,
                            error=repr(exc))
        if self.authorizer is not None:
            await self.authorizer.stop()
        # Closing the store ends the session and with it the registration, before the logs' shutdown (seconds
        # with many partitions): the controller stops counting on a broker that will not serve.
        if self.store is not None:
            await self.store.close()
        if self._logs_loaded:
            await self.logs.shutdown()
        self._unlock_log_dir()

    def _offsets_settled(self, topic: str, partition: int, producer_id: int, committed: bool, offset: int) -> None:
        """A marker reached a partition at `offset`: TxnOffsetCommit's offsets before it there count
        (commit) or go (abort)."""
        if topic == OFFSETS_TOPIC:
            self.groups.store.transaction_completed(partition, producer_id, committed, offset)

    async def stop(self) -> None:
        if self._start_ended is not None and not self._start_ended.is_set():
            # Stopped while it starts (an embedding program; run() waits for start): the start sees its server
            # stopped at its next step and undoes itself; tearing down beside it would stop services it has
            # yet to start and close the logs and store under it.
            log.info("broker stopping while it starts: the start is abandoned")
            await self.server.stop()
            await self._start_ended.wait()
            if self._abandoned:
                return
        log.info("broker stopping")
        for service in self.services:
            # Requests parked by a service (JoinGroup, SyncGroup) are answered before the network waits
            # for in-flight requests to finish.
            begin_shutdown = getattr(service, "begin_shutdown", None)
            if begin_shutdown is not None:
                begin_shutdown()
        async with _timed_stop("network"):
            await self.server.stop()
        for service in reversed(self.services):
            async with _timed_stop(type(service).__name__):
                await service.stop()
        topics: TopicManager | None = getattr(self, "topics", None)  # absent when start() failed early
        if topics is not None:
            await topics.deletion_retries.stop()
        logs: LogManager | None = getattr(self, "logs", None)  # absent when start() failed early
        if logs is not None:
            async with _timed_stop("logs"):
                await logs.shutdown()
        if self.authorizer is not None:
            await self.authorizer.stop()
        group_configs: GroupConfigs | None = getattr(self, "group_configs", None)
        if group_configs is not None:
            group_configs.stop()
        if self.store is not None:
            async with _timed_stop("metadata store"):
                await self.store.close()  # on ZooKeeper this ends the session: the registration goes now
        self._unlock_log_dir()
        log.info("broker stopped")

    def _lock_log_dir(self) -> None:
        """Kafka's `.lock`: a second process on the same log dir stops here. It also makes this
        process the only one that can be using the ZooKeeper session recorded in the log dir."""
        path = self.config.log_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(f"log.dirs: {self.config.log_dir} is in use by another broker process "
                              f"(it holds {path})") from None
        self._lock_fd = fd

    def _throttle_rates_changed(self) -> None:
        dynamic = self.dynamic_config
        self.replicas.throttles.set_rates(dynamic.replication_throttle(LEADER_RATE),
                                          dynamic.replication_throttle(FOLLOWER_RATE))
        self.logs.cleaner.set_io_rate(dynamic.cleaner_io_rate())

    def _share_topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        """A topic a share group subscribes to, as its assignor needs it (internal topics are not shared)."""
        topic = self.topics.get(name)
        if topic is None or topic.internal:
            return None
        return topic.topic_id, len(topic.replicas)

    def _halt(self, why: str) -> None:
        """The broker cannot go on (a finalized feature level it cannot serve): run() stops it."""
        self.halt_reason = why
        self.halted.set()

    def _features_changed(self, features: FinalizedFeatures) -> None:
        self.transactions.transaction_version = features.transaction_version

    def _consumer_topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        """Every topic a consumer group may subscribe to (by name or regex): name -> (id, partitions).
        The same object until a topic changes: the consumer groups keep what they derive from it."""
        changes, topics = self._consumer_topics_seen
        if changes != self.topics.changes:
            topics = {t.name: (t.topic_id, len(t.replicas)) for t in self.topics.all()}
            self._consumer_topics_seen = (self.topics.changes, topics)
        return topics

    def _producer_settings_changed(self) -> None:
        """producer.id.expiration.ms and transaction.partition.verification.enable, as in force now."""
        settings = self.dynamic_config.transactions
        self.replicas.producer_id_expiration_ms = settings.producer_id_expiration_ms
        self.transactions.settings = settings

    def _producer_last_offsets(self, tp: TopicPartition) -> dict[int, int] | None:
        """The last offset of each producer's last batch, where this replica keeps producer state."""
        partition = self.replicas.partitions.get(tp)
        if partition is None or not partition.producers_loaded:
            return None
        return {pid: entry.last_offset for pid, entry in partition.producers.producers.items()}

    def _cleaning_bound(self, tp: TopicPartition) -> int:
        """The log cleaner's bound; a log without its partition yet is not cleaned (0)."""
        partition = self.replicas.partitions.get(tp)
        return 0 if partition is None else partition.cleaning_bound()

    def _producer_snapshot_offset(self, tp: TopicPartition) -> int | None:
        partition = self.replicas.partitions.get(tp)
        return None if partition is None else partition.producers.snapshot_offset

    def _unlock_log_dir(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the lock
            self._lock_fd = None

    async def _open_store(self) -> MetadataStore:
        """The embedded store, or ZooKeeper when zookeeper.connect is set."""
        config = self.config
        if config.zookeeper_connect is None:
            return await EmbeddedStore.open(config.log_dir / METADATA_FILE)
        from broker.cluster.zookeeper import ZooKeeperStore, load_session

        loop = asyncio.get_running_loop()
        session_file = config.log_dir / ZOOKEEPER_SESSION_FILE
        previous = await loop.run_in_executor(None, load_session, session_file)
        store = await ZooKeeperStore.open(config.zookeeper_connect,
                                          session_timeout_ms=config.zookeeper_session_timeout_ms,
                                          connection_timeout_ms=config.zookeeper_connection_timeout_ms,
                                          previous_session=previous)
        self.store = store  # closed by start() if what follows fails
        await self._save_session()
        store.add_session_listener(self._on_new_session)
        return store

    async def _save_session(self) -> None:
        """Written before the registration that the session will own, so a crash never leaves a
        registration whose session this broker cannot end."""
        from broker.cluster.zookeeper import save_session

        session = self._zookeeper().session
        assert session is not None  # the store is connected: it has a session
        await save_session(self.config.log_dir / ZOOKEEPER_SESSION_FILE, session)

    async def _on_new_session(self) -> None:
        """The ZooKeeper session expired and a new one began: the registration went with the old one."""
        await self._save_session()
        if not self._registered:
            return  # start-up registers once the logs are loaded, in the session current then
        try:
            await self._register()
        except ConfigError as exc:
            log.error("broker not registered after a new ZooKeeper session", node_id=self.node_id, error=str(exc))
            return
        log.warning("broker registered again after a new ZooKeeper session", node_id=self.node_id,
                    session=str(self._zookeeper().session))

    def _alive_brokers(self) -> dict[int, str | None]:
        assert self.cluster is not None  # asked in a cluster only, once start() made the Cluster
        return self.cluster.alive_racks()

    def _opened_store(self) -> MetadataStore:
        assert self.store is not None, "the metadata store opens first in start()"
        return self.store

    def _zookeeper(self) -> ZooKeeperStore:
        from broker.cluster.zookeeper import ZooKeeperStore  # kazoo is loaded only in a cluster

        store = self.store
        assert isinstance(store, ZooKeeperStore), "sessions are ZooKeeper's"
        return store

    async def _cluster_id(self) -> str:
        store = self._opened_store()
        try:
            return ClusterIdZNode.decode((await store.get(ClusterIdZNode.PATH))[0])
        except NoNode:
            cluster_id = topic_id_to_str(uuid.uuid4())
        try:
            await store.create(ClusterIdZNode.PATH, ClusterIdZNode.encode(cluster_id))
        except NodeExists:  # another broker of the cluster made it first
            return ClusterIdZNode.decode((await store.get(ClusterIdZNode.PATH))[0])
        return cluster_id

    def _check_meta_properties(self) -> None:
        """meta.properties ties the log dir to one node and cluster, as in Kafka: a mix-up stops start-up."""
        path = self.config.log_dir / META_PROPERTIES
        wanted = {"version": "1", "node.id": str(self.config.node_id), "cluster.id": self.cluster_id}
        if path.exists():
            found = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line
                         and not line.startswith("#"))
            for key in ("node.id", "cluster.id"):
                if found.get(key) not in (None, wanted[key]):
                    raise ConfigError(f"{key}: log dir {self.config.log_dir} belongs to {key}={found[key]}, "
                                      f"not {wanted[key]}")
            return
        path.write_text("".join(f"{k}={v}\n" for k, v in wanted.items()))

    async def _check_node_id_free(self) -> None:
        try:
            await self._opened_store().free_registration(BrokerIdZNode.path(self.config.node_id))
        except NodeExists as exc:
            raise self._duplicate(exc) from None

    async def _register_once_loaded(self) -> None:
        """The first registration, after the logs loaded. Another broker that took the node id meanwhile
        stops start-up (ConfigError; `_abandon_start` closes the logs cleanly)."""
        await self._register()
        self._registered = True

    def _duplicate(self, exc: NodeExists) -> ConfigError:
        return ConfigError(f"node.id={self.config.node_id} is already registered by another live broker "
                           f"(NodeExists: {exc}); every broker of a cluster needs its own node.id")

    async def _register(self) -> None:
        listener = self.config.advertised_listener
        # host/port: the inter-broker listener, which the other brokers use; endpoints: every listener's
        # advertised address, from which clients get the one of the listener they came in on.
        registration = BrokerRegistration(
            host=listener.host, port=listener.port, rack=self.config.rack,
            endpoints=tuple(str(item) for item in self.config.advertised_listeners),
            security_protocols=dict(self.config.listener_protocols), timestamp=str(int(time.time() * 1000)),
            features=dict(SUPPORTED))
        try:
            await self._opened_store().register(BrokerIdZNode.path(self.config.node_id),
                                                BrokerIdZNode.encode(registration))
        except NodeExists as exc:
            raise self._duplicate(exc) from None


async def run(config: BrokerConfig) -> None:
    """Run until SIGTERM or SIGINT, then shut down cleanly."""
    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    # What start-up built (codecs, configs, logs) lives as long as the process: keep it out of the
    # cyclic collector's full passes, which otherwise stop the loop for ~20 ms now and then.
    gc.collect()
    gc.freeze()
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(broker.halted.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
        await broker.stop()
    if broker.halt_reason is not None:
        raise UnservableLevels(broker.halt_reason)
