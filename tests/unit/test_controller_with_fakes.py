"""The controller needs only the store, the topics and a few lookups (broker/cluster/controller.py):
here a real embedded store and small fakes for the rest drive one reconcile round."""

from types import SimpleNamespace

from broker.cluster.controller import Controller
from broker.cluster.layout import PartitionStateZNode
from broker.cluster.partition_state import PartitionState
from broker.cluster.store import EmbeddedStore
from broker.config import ReplicationConfig
from broker.log import TopicPartition


class FakeTopics:
    def __init__(self, replicas):
        self.topic = SimpleNamespace(name="t", replicas=replicas, states={}, unclean_leader_election=None)

    def all(self):
        return [self.topic]


async def test_a_round_moves_leadership_off_a_dead_broker(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await store.put(PartitionStateZNode.path("t", 0), PartitionStateZNode.encode(PartitionState(1, 4, (1, 2, 3), 1)))
    await store.put(PartitionStateZNode.path("t", 1), PartitionStateZNode.encode(PartitionState(2, 1, (2, 1), 1)))
    written = []
    controller = Controller(store, FakeTopics({0: [1, 2, 3], 1: [2, 1, 3]}), 2, ReplicationConfig(),
                            alive_ids=lambda: [2, 3], controller_id=lambda: 2,
                            state_written=lambda tp, state, version: written.append((tp, state.leader)))
    controller.active = True
    assert await controller.reconcile() == 2
    first = PartitionStateZNode.decode((await store.get(PartitionStateZNode.path("t", 0)))[0])
    assert (first.leader, first.leader_epoch, first.isr, first.controller_epoch) == (2, 5, (2, 3), 0)
    second = PartitionStateZNode.decode((await store.get(PartitionStateZNode.path("t", 1)))[0])
    assert (second.leader, second.isr) == (2, (2,))  # broker 1 leaves the ISR, leadership stays
    assert written == [(TopicPartition("t", 0), 2), (TopicPartition("t", 1), 2)]
    await store.close()
