"""The metrics service: builds the registry of collectors from the broker's parts and serves it on
`ebb.metrics.listener`. Started after the other services, stopped before them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from broker.log.segment_file import OPEN_SEGMENTS
from broker.metrics.client_quotas import ClientQuotaCollector
from broker.metrics.controller import ControllerCollector
from broker.metrics.fetch_sessions import FetchSessionCollector
from broker.metrics.groups import GroupCollector
from broker.metrics.http import MetricsEndpoint
from broker.metrics.log_cleaner import LogCleanerCollector
from broker.metrics.log_dirs import LogDirHealthCollector, LogDirSpaceCollector
from broker.metrics.network import NetworkCollector
from broker.metrics.open_files import OpenSegmentsCollector
from broker.metrics.partitions import PartitionCollector
from broker.metrics.purgatories import PurgatoryCollector

if TYPE_CHECKING:
    from broker.cluster.cluster import Cluster
    from broker.fetch_sessions import FetchSessionCache
    from broker.group import GroupCoordinator
    from broker.log.manager import LogManager
    from broker.quotas.enforced import ClientQuotas
    from broker.replica import ReplicaManager
    from broker.server import BrokerServer
    from broker.topics import TopicManager


@dataclass(frozen=True)
class MetricSources:
    """The broker's parts the collectors read at scrape time."""

    listener_names: list[str]
    server: BrokerServer
    replicas: ReplicaManager
    logs: LogManager
    topics: TopicManager
    cluster: Cluster | None  # None on a single broker
    groups: GroupCoordinator
    fetch_sessions: FetchSessionCache
    quotas: ClientQuotas


class BrokerControllerView:
    """The controller's gauges from the topics' partition states and the cluster view (none on a
    single broker, which is its own controller)."""

    def __init__(self, topics: TopicManager, cluster: Cluster | None, logs: LogManager) -> None:
        self._topics = topics
        self._cluster = cluster
        self._logs = logs

    def is_active_controller(self) -> bool:
        return self._cluster is None or self._cluster.controller.active

    def offline_partition_count(self) -> int:
        cluster = self._cluster
        if cluster is None:  # every partition is led here unless its log is offline
            return len(self._logs.offline_partitions)
        offline = 0
        for topic in self._topics.all():
            for index in topic.replicas:
                leader = topic.leader(index)
                offline += leader < 0 or not cluster.is_alive(leader)
        return offline

    def preferred_replica_imbalance_count(self) -> int:
        """Partitions whose leader is not their first replica, an offline one included (Kafka's
        hasPreferredLeader), leaving out the topics marked for deletion as Kafka's ZooKeeper controller
        did. One broker leads every partition it hosts but the offline ones."""
        cluster = self._cluster
        if cluster is None:
            return len(self._logs.offline_partitions)
        marked = cluster.deletions.marked
        return sum(topic.leader(index) != replicas[0] for topic in self._topics.all() if topic.name not in marked
                   for index, replicas in topic.replicas.items() if replicas)

    def topics_to_delete(self) -> int:
        return 0 if self._cluster is None else len(self._cluster.deletions.marked)

    def topic_count(self) -> int:
        return len(self._topics.all())

    def partition_count(self) -> int:
        return sum(len(topic.replicas) for topic in self._topics.all())


def build_registry(sources: MetricSources) -> CollectorRegistry:
    """Every collector, reading the broker's parts through their narrow views."""
    registry = CollectorRegistry(auto_describe=False)
    replicas, server = sources.replicas, sources.server
    registry.register(NetworkCollector(sources.listener_names, server.connections, server.request_metrics,
                                       lambda: server.file_bytes_sent))
    # It yields None now and then as a pause, which our render() takes and prometheus' Collector type has not.
    registry.register(PartitionCollector(replicas, sources.logs))  # type: ignore[arg-type]
    registry.register(replicas.counters)
    registry.register(PurgatoryCollector([replicas.produces, replicas.fetches, replicas.deletions]))
    registry.register(ControllerCollector(BrokerControllerView(sources.topics, sources.cluster, sources.logs)))
    registry.register(GroupCollector(sources.groups))
    registry.register(FetchSessionCollector(sources.fetch_sessions))
    registry.register(OpenSegmentsCollector(OPEN_SEGMENTS))
    registry.register(LogDirSpaceCollector(sources.logs.space))
    registry.register(LogDirHealthCollector(sources.logs.health))
    registry.register(LogCleanerCollector(sources.logs.cleaner))
    registry.register(ClientQuotaCollector(sources.quotas))
    return registry


class MetricsService:
    def __init__(self, sources: MetricSources, host: str, port: int) -> None:
        self._sources = sources
        self._host, self._port = host, port
        self.endpoint: MetricsEndpoint | None = None

    async def bind(self) -> None:
        """The endpoint's port taken, before the broker registers; `start` serves it."""
        self.endpoint = MetricsEndpoint(build_registry(self._sources), self._host, self._port)
        await self.endpoint.bind()

    async def start(self) -> None:
        if self.endpoint is None:
            await self.bind()
        assert self.endpoint is not None
        await self.endpoint.start()

    async def stop(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.stop()
