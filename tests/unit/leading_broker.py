"""A broker shell around the real LogManager, ReplicaManager, Partition and PartitionLog, leading every
partition of one topic: for tests of what waits on, or throttles, a follower that reports only through
the calls the tests make (broker 2 is alive but runs nothing)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace

from broker.cluster.store import EmbeddedStore
from broker.config import ReplicationConfig
from broker.log import LogManager
from broker.replica import ReplicaManager
from broker.topic import Topic

LEADER, FOLLOWER = 1, 2


class Topics:
    """The one topic, by name and by id."""

    def __init__(self, topic: Topic) -> None:
        self.topic = topic

    def get(self, name):
        return self.topic if name == self.topic.name else None

    def by_id(self, topic_id):
        return self.topic if topic_id == self.topic.topic_id else None

    def all(self):
        return [self.topic]


@asynccontextmanager
async def leading_broker(tmp_path: Path, topic: Topic) -> AsyncIterator[SimpleNamespace]:
    """Broker 1 with `topic`'s logs created and its replicas started; stopped and shut down after."""
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    for tp in topic.partitions():
        await logs.get_or_create_log(tp, topic_id=topic.topic_id)
    broker = SimpleNamespace(node_id=LEADER, topics=Topics(topic), logs=logs, cluster=None, authorizer=None,
                             store=await EmbeddedStore.open(tmp_path / "meta.json"),
                             config=SimpleNamespace(delete_records_v3_enable=True, replication=ReplicationConfig()))
    replicas = ReplicaManager(broker)
    replicas.is_alive = lambda broker_id: True
    broker.replicas = replicas
    await replicas.start()
    try:
        yield broker
    finally:
        await replicas.stop()
        await logs.shutdown()
