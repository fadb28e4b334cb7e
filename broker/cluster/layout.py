"""The metadata store's layout: every node's path and the encoding of its data, in one place.

Kafka's ZkData is the model, and the paths and JSON are Kafka's ZooKeeper layout, so that the embedded
store (broker/cluster/store.py) and ZooKeeper (broker/cluster/zookeeper.py) hold the same tree. Each
node is a class with `path(...)`, and `encode(...)`/`decode(data)` where it has data; nobody else
spells a path or parses a node.
"""

from __future__ import annotations

import json

from broker.cluster.partition_state import PartitionState


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True).encode()


class TopicsZNode:
    """`/brokers/topics`: a child per topic."""

    PATH = "/brokers/topics"


class TopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.PATH}/{topic}"


class PartitionStateZNode:
    """`/brokers/topics/<t>/partitions/<p>/state`: the partition's leader, leader epoch and ISR."""

    VERSION = 1

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicZNode.path(topic)}/partitions/{partition}/state"

    @staticmethod
    def encode(state: PartitionState) -> bytes:
        return _json({"version": PartitionStateZNode.VERSION, "controller_epoch": state.controller_epoch,
                      "leader": state.leader, "leader_epoch": state.leader_epoch, "isr": list(state.isr)})

    @staticmethod
    def decode(data: bytes) -> PartitionState:
        raw = json.loads(data)
        return PartitionState(leader=int(raw["leader"]), leader_epoch=int(raw["leader_epoch"]),
                              isr=tuple(int(r) for r in raw["isr"]),
                              controller_epoch=int(raw.get("controller_epoch", 0)))
