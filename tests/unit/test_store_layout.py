"""The metadata store's layout (broker/cluster/layout.py) reads and writes the nodes as Kafka's
ZooKeeper layout has them."""

import json

from broker.cluster.layout import PartitionStateZNode
from broker.cluster.partition_state import PartitionState


def test_partition_state_is_kafkas_json():
    written_by_kafka = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,1]}'
    state = PartitionStateZNode.decode(written_by_kafka)
    assert state == PartitionState(leader=2, leader_epoch=7, isr=(2, 1), controller_epoch=3)
    assert json.loads(PartitionStateZNode.encode(state)) == json.loads(written_by_kafka)
    assert PartitionStateZNode.path("t", 4) == "/brokers/topics/t/partitions/4/state"


def test_a_new_partition_is_led_by_its_first_replica():
    assert PartitionState.initial([3, 1, 2]) == PartitionState(leader=3, leader_epoch=0, isr=(3, 1, 2),
                                                               controller_epoch=1)
