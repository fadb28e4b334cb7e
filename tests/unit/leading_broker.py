"""The real LogManager, ReplicaManager, Partition and PartitionLog of broker 1, leading every partition
of one topic, built from small typed fakes of what ReplicaManager is given (the topics, the cluster),
and a broker shell holding them for the handlers: for tests of what waits on, or throttles, a follower
that reports only through the calls the tests make (broker 2 is alive but runs nothing)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from broker.cluster.store import EmbeddedStore
from broker.config import BrokerConfig, ReplicationConfig, TransactionConfig, load_config
from broker.log import LogManager, TopicPartition
from broker.quotas.enforced import ClientQuotas
from broker.replica import Partition, ReplicaManager
from broker.replica.producer_ids import ProducerIdManager
from broker.topic import Topic

LEADER, FOLLOWER = 1, 2


class Topics:
    """The one topic, by name and by id."""

    def __init__(self, topic: Topic) -> None:
        self.topic = topic

    def get(self, name: str) -> Topic | None:
        return self.topic if name == self.topic.name else None

    def by_id(self, topic_id) -> Topic | None:
        return self.topic if topic_id == self.topic.topic_id else None

    def all(self) -> list[Topic]:
        return [self.topic]


class AliveFollowers:
    """The cluster as the replicas see it: every broker alive, none reachable (nothing here follows a
    leader), and the ISR changes a leader asks for recorded, never written."""

    def __init__(self) -> None:
        self.isr_changes: list[tuple[TopicPartition, set[int]]] = []

    def is_alive(self, broker_id: int) -> bool:
        return True

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        return None

    async def alter_isr(self, partition: Partition, isr: set[int]) -> None:
        self.isr_changes.append((partition.topic_partition, set(isr)))


@dataclass
class LeadingBroker:
    """What the Produce, Fetch and DeleteRecords handlers read of the broker here (no ZooKeeper, no ACLs)."""

    topics: Topics
    logs: LogManager
    replicas: ReplicaManager
    config: BrokerConfig
    node_id: int = LEADER
    cluster: None = None
    authorizer: None = None
    quotas: ClientQuotas = field(default_factory=lambda: ClientQuotas(11, 1))  # none set: nobody held back


@asynccontextmanager
async def leading_broker(tmp_path: Path, topic: Topic) -> AsyncIterator[LeadingBroker]:
    """Broker 1 with `topic`'s logs created and its replicas started; stopped and shut down after."""
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    for tp in topic.partitions():
        await logs.get_or_create_log(tp, topic_id=topic.topic_id)
    topics = Topics(topic)
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    replicas = ReplicaManager(LEADER, topics, logs, ProducerIdManager(store, LEADER), ReplicationConfig(),
                              TransactionConfig())
    replicas.join_cluster(AliveFollowers())
    await replicas.start()
    config = load_config(None, [f"node.id={LEADER}", "delete.records.v3.enable=true"])
    try:
        yield LeadingBroker(topics, logs, replicas, config)
    finally:
        await replicas.stop()
        await logs.shutdown()
        await store.close()
