"""What a handler is given of the broker: its settings and the services it built at start-up.

A typing Protocol, so that a handler names what it uses and not the Broker that owns it (tests pass
small fakes). broker/app.py's Broker is what the server passes (BrokerServer takes a BrokerContext,
so mypy checks that the Broker is one); it serves requests only after start() made every service.
A handler that reads little of it may declare a narrower Protocol of its own (DescribeLogDirs,
ListTransactions, AlterPartitionReassignments, controller_requests.py's routing): the
registry's type checks that BrokerContext satisfies it, and its tests pass small typed fakes.
`cluster` is None without ZooKeeper.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.client_metrics_configs import ClientMetricsConfigs
    from broker.cluster.cluster import Cluster
    from broker.config import BrokerConfig
    from broker.dynamic_config import DynamicBrokerConfig
    from broker.feature_updates import FeatureUpdater
    from broker.features import FinalizedFeatures
    from broker.fetch_sessions import FetchSessionCache
    from broker.group import GroupCoordinator
    from broker.group_configs import GroupConfigs
    from broker.log.manager import LogManager
    from broker.quotas.enforced import ClientQuotas
    from broker.quotas.store import ClientQuotaStore
    from broker.replica import ReplicaManager
    from broker.security.authorizer import Authorizer
    from broker.security.credentials import CredentialStore
    from broker.share.coordinator import ShareCoordinator
    from broker.share.manager import SharePartitionManager
    from broker.topics import TopicManager
    from broker.txn import TransactionCoordinator


class BrokerContext(Protocol):
    @property
    def config(self) -> BrokerConfig: ...

    @property
    def dynamic_config(self) -> DynamicBrokerConfig: ...

    @property
    def group_configs(self) -> GroupConfigs: ...

    @property
    def client_metrics(self) -> ClientMetricsConfigs: ...

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def topics(self) -> TopicManager: ...

    @property
    def logs(self) -> LogManager: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def fetch_sessions(self) -> FetchSessionCache: ...

    @property
    def groups(self) -> GroupCoordinator: ...

    @property
    def features(self) -> FinalizedFeatures: ...

    @property
    def feature_updates(self) -> FeatureUpdater: ...

    @property
    def shares(self) -> SharePartitionManager: ...

    @property
    def share_coordinator(self) -> ShareCoordinator: ...

    @property
    def transactions(self) -> TransactionCoordinator: ...

    @property
    def cluster(self) -> Cluster | None: ...

    @property
    def credentials(self) -> CredentialStore: ...

    @property
    def authorizer(self) -> Authorizer | None: ...

    @property
    def client_quotas(self) -> ClientQuotaStore: ...

    @property
    def quotas(self) -> ClientQuotas: ...
