"""The controller's gauges read the topics, the cluster view and the logs (broker/metrics/service.py):
small fakes stand for them."""

import uuid
from dataclasses import dataclass, field

from broker.cluster.partition_state import NO_LEADER, PartitionState
from broker.metrics.service import BrokerControllerView
from broker.topic import Topic


class FakeTopics:
    def __init__(self, *topics: Topic) -> None:
        self.topics = list(topics)

    def all(self) -> list[Topic]:
        return self.topics


@dataclass
class FakeController:
    active: bool = True


@dataclass
class FakeCluster:
    alive: set[int]
    controller: FakeController = field(default_factory=FakeController)
    deletions: object = None

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.alive


@dataclass
class FakeLogs:
    offline_partitions: dict = field(default_factory=dict)


def test_a_partition_is_offline_without_a_leader_or_with_a_dead_one():
    topic = Topic("t", uuid.uuid4(), {0: [1, 2], 1: [2, 1], 2: [3, 1]},
                  states={0: PartitionState(1, 0, (1, 2), 1), 1: PartitionState(2, 3, (2,), 1),
                          2: PartitionState(NO_LEADER, 4, (3,), 1)})
    view = BrokerControllerView(FakeTopics(topic), FakeCluster(alive={1, 3}), FakeLogs())
    assert view.offline_partition_count() == 2  # 1: its leader (2) is gone; 2: no leader
    assert (view.partition_count(), view.is_active_controller()) == (3, True)
    single = BrokerControllerView(FakeTopics(topic), None, FakeLogs({"t-0": "disk failed"}))
    assert single.offline_partition_count() == 1
