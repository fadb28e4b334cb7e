"""Kafka's auto leader rebalance (broker/cluster/leader_balance.py): the imbalance computation, and one
controller check on a real embedded store holding the preferred elections it calls for."""

import uuid

import pytest

from broker.cluster.controller import Controller
from broker.cluster.layout import DeleteTopicsTopicZNode, PartitionStateZNode
from broker.cluster.leader_balance import Placement, imbalanced
from broker.cluster.partition_state import PartitionState
from broker.cluster.store import EmbeddedStore
from broker.config import ConfigError, ReplicationConfig, build_config
from broker.dynamic_config import DynamicConfigError, validate
from broker.log import TopicPartition
from broker.topic import Topic
from protocol.errors import ErrorCode
from tests.unit.fakes import TopicsOf


def tp(partition: int, topic: str = "t") -> TopicPartition:
    return TopicPartition(topic, partition)


def placements(*rows: tuple[int, int] | tuple[int, int, bool]) -> list[Placement]:
    """(preferred, leader[, moving]) per partition of topic t, in partition order."""
    return [Placement(tp(i), row[0], row[1], row[2] if len(row) == 3 else False) for i, row in enumerate(rows)]


@pytest.mark.parametrize(("rows", "percentage", "expected"), [
    # Broker 1 leads every partition it is preferred for: balanced.
    ([(1, 1), (1, 1), (2, 2)], 10, {}),
    # 1 of 10 led elsewhere is 10 %: not above 10 %, nothing moves; at 9 % it does.
    ([(1, 2)] + [(1, 1)] * 9, 10, {}),
    ([(1, 2)] + [(1, 1)] * 9, 9, {1: [tp(0)]}),
    # Per broker: broker 2 is imbalanced (1 of 2), broker 1 is not (0 of 2).
    ([(1, 1), (1, 1), (2, 3), (2, 2)], 10, {2: [tp(2)]}),
    # An offline partition (leader -1) counts as led elsewhere and is a candidate.
    ([(1, -1), (1, 1)], 10, {1: [tp(0)]}),
    # A partition being reassigned counts in the ratio but gets no election.
    ([(1, 2, True), (1, 3), (1, 1)], 10, {1: [tp(1)]}),
    ([(1, 2, True), (1, 1)], 10, {}),
    # 0 %: any partition led elsewhere; a negative percentage (Kafka had no bound) acts alike.
    ([(1, 2)] + [(1, 1)] * 99, 0, {1: [tp(0)]}),
    ([(1, 1)], -5, {}),
    # 100 %: never (a ratio is at most 1).
    ([(1, 2), (1, 3)], 100, {}),
])
def test_imbalance(rows, percentage, expected):
    assert imbalanced(placements(*rows), percentage) == expected


def test_the_settings_are_kafkas_and_read_only():
    defaults = ReplicationConfig()
    assert (defaults.auto_leader_rebalance_enable, defaults.leader_imbalance_check_interval_s,
            defaults.leader_imbalance_per_broker_percentage) == (True, 300, 10)
    with pytest.raises(ConfigError, match="leader.imbalance.check.interval.seconds"):
        build_config({"leader.imbalance.check.interval.seconds": "0"})
    replication = build_config({"leader.imbalance.per.broker.percentage": "-1",
                                "auto.leader.rebalance.enable": "false"}).replication
    assert (replication.leader_imbalance_per_broker_percentage, replication.auto_leader_rebalance_enable) == (-1, False)
    for name in ("auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
                 "leader.imbalance.per.broker.percentage"):
        with pytest.raises(DynamicConfigError, match="Cannot update these configs dynamically"):
            validate({name: "1"})


def state(leader: int, isr: list[int], epoch: int = 3) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, isr=tuple(isr), controller_epoch=1)


def topic(name: str, replicas: dict[int, list[int]], states: dict[int, PartitionState],
          adding: dict[int, list[int]] | None = None) -> Topic:
    return Topic(name, uuid.uuid4(), replicas, states=states, adding=adding or {})


async def test_a_check_holds_preferred_elections_for_imbalanced_brokers(tmp_path):
    """Broker 1 is preferred for t-0..2 but leads none. t-0 goes back to it; t-1 stays (1 is not in its
    ISR); t-2 stays (being reassigned); t-3 stays (its preferred replica 3 is dead). Topic d, marked
    for deletion, is left out altogether, and broker 2 leads what it is preferred for."""
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    states = {0: state(2, [1, 2]), 1: state(2, [2]), 2: state(2, [1, 2]), 3: state(2, [2, 3]), 4: state(2, [2, 1])}
    t = topic("t", {0: [1, 2], 1: [1, 2], 2: [1, 2], 3: [3, 2], 4: [2, 1]}, states, adding={2: [1]})
    d = topic("d", {0: [1, 2]}, {0: state(2, [1, 2])})
    for name, index, partition_state in [*(("t", i, s) for i, s in states.items()), ("d", 0, d.states[0])]:
        await store.put(PartitionStateZNode.path(name, index), PartitionStateZNode.encode(partition_state))
    await store.put(DeleteTopicsTopicZNode.path("d"), b"")
    written = []
    controller = Controller(store, TopicsOf(t, d), 2, ReplicationConfig(), alive_ids=lambda: [1, 2],
                            controller_id=lambda: 2, state_written=lambda tp_, s, v: written.append((tp_, s.leader)))
    controller.active = True
    results = await controller.rebalance_leaders()
    assert {k: r.error_code for k, r in results.items()} == {
        tp(0): ErrorCode.NONE, tp(1): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        tp(3): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
    assert written == [(tp(0), 1)]
    moved = PartitionStateZNode.decode((await store.get(PartitionStateZNode.path("t", 0)))[0])
    assert (moved.leader, moved.leader_epoch, moved.isr) == (1, 4, (1, 2))
    await store.close()
