"""What the handlers that describe the cluster (Metadata, DescribeCluster, FindCoordinator) say about
brokers and leaders: this broker alone without ZooKeeper, the registered brokers and the partition
states of broker/cluster/cluster.py with it."""

from __future__ import annotations

from typing import NamedTuple


class BrokerEndpoint(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


def alive_brokers(broker) -> list[BrokerEndpoint]:
    cluster = broker.cluster
    if cluster is None:
        listener = broker.config.advertised_listener
        return [BrokerEndpoint(broker.node_id, listener.host, listener.port, broker.config.rack)]
    return [BrokerEndpoint(node_id, found["host"], int(found["port"]), found.get("rack"))
            for node_id, found in sorted(cluster.registrations.items())]


def endpoint_of(broker, node_id: int) -> BrokerEndpoint | None:
    return next((b for b in alive_brokers(broker) if b.node_id == node_id), None)


def controller_id(broker) -> int:
    return broker.node_id if broker.cluster is None else broker.cluster.controller_id


def leader_of(broker, topic, partition: int) -> int:
    """The partition's leader, -1 when it has none alive."""
    cluster = broker.cluster
    if cluster is None:
        return broker.node_id
    leader = int(topic.states.get(partition, {}).get("leader", -1))
    return leader if cluster.is_alive(leader) else -1
