"""What the handlers that describe the cluster (Metadata, DescribeCluster, FindCoordinator) say about
brokers and leaders: this broker alone without ZooKeeper, the registered brokers and the partition
states of broker/cluster/cluster.py with it."""

from __future__ import annotations

from typing import NamedTuple

from broker.handlers.context import BrokerContext


class BrokerEndpoint(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


def alive_brokers(broker: BrokerContext, listener_name: str) -> list[BrokerEndpoint]:
    """The alive brokers as a client of `listener_name` must reach them: each broker's advertised
    endpoint for that listener (a broker without it is left out, so that nobody is sent to another
    listener, e.g. from SASL_PLAINTEXT to PLAINTEXT)."""
    cluster = broker.cluster
    if cluster is None:
        mine = [item for item in broker.config.advertised_listeners if item.name == listener_name]
        return [BrokerEndpoint(broker.node_id, item.host, item.port, broker.config.rack) for item in mine]
    found_endpoints = []
    for node_id, found in sorted(cluster.registrations.items()):
        endpoint = _registered_endpoint(found, listener_name)
        if endpoint is not None:
            found_endpoints.append(BrokerEndpoint(node_id, endpoint[0], endpoint[1], found.get("rack")))
    return found_endpoints


def _registered_endpoint(registration: dict, listener_name: str) -> tuple[str, int] | None:
    for text in registration.get("endpoints", []):
        name, sep, address = str(text).partition("://")
        host, _, port = address.rpartition(":")
        if sep and name == listener_name and port.isdigit():
            return host.strip("[]"), int(port)
    return None


def endpoint_of(broker: BrokerContext, node_id: int, listener_name: str) -> BrokerEndpoint | None:
    return next((b for b in alive_brokers(broker, listener_name) if b.node_id == node_id), None)


def controller_id(broker: BrokerContext) -> int:
    return broker.node_id if broker.cluster is None else broker.cluster.controller_id


def leader_of(broker: BrokerContext, topic, partition: int) -> int:
    """The partition's leader, -1 when it has none alive."""
    cluster = broker.cluster
    if cluster is None:
        return broker.node_id
    leader = int(topic.states.get(partition, {}).get("leader", -1))
    return leader if cluster.is_alive(leader) else -1
