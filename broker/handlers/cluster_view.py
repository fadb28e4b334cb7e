"""What the handlers that describe the cluster (Metadata, DescribeTopicPartitions, DescribeCluster,
FindCoordinator) say about brokers, leaders and partitions: this broker alone without ZooKeeper, the
registered brokers and the partition states of broker/cluster/cluster.py with it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from broker.cluster.layout import BrokerRegistration
from broker.handlers.context import BrokerContext
from broker.log import TopicPartition
from protocol.errors import ErrorCode


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
            found_endpoints.append(BrokerEndpoint(node_id, endpoint[0], endpoint[1], found.rack))
    return found_endpoints


def _registered_endpoint(registration: BrokerRegistration, listener_name: str) -> tuple[str, int] | None:
    for text in registration.endpoints:
        name, sep, address = text.partition("://")
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
    leader = topic.leader(partition)
    return leader if cluster.is_alive(leader) else -1


class PartitionView(NamedTuple):
    """One partition as Metadata and DescribeTopicPartitions describe it."""

    error_code: ErrorCode
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


def partition_views(broker: BrokerContext, topic, offline_logs: Mapping[TopicPartition, str]) -> list[PartitionView]:
    """Every partition of `topic`. In a cluster: the partition state's leader and ISR, LEADER_NOT_AVAILABLE
    without an alive leader, offline replicas those on unregistered brokers. On one broker: this broker
    leads all, except a partition whose log is offline (in `offline_logs`)."""
    views = []
    cluster = broker.cluster
    for tp in topic.partitions():
        replicas = list(topic.replicas[tp.partition])
        epoch = topic.leader_epoch(tp.partition)
        if cluster is not None:
            leader = leader_of(broker, topic, tp.partition)
            views.append(PartitionView(ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE, tp.partition,
                                       leader, epoch, replicas, topic.isr(tp.partition),
                                       [r for r in replicas if not cluster.is_alive(r)]))
        elif tp in offline_logs:
            views.append(PartitionView(ErrorCode.LEADER_NOT_AVAILABLE, tp.partition, -1, epoch, replicas, [],
                                       [broker.node_id]))
        else:
            views.append(PartitionView(ErrorCode.NONE, tp.partition, broker.node_id, _local_epoch(broker, tp, epoch),
                                       replicas, topic.isr(tp.partition), []))
    return views


def offline_logs(broker: BrokerContext) -> Mapping[TopicPartition, str]:
    return broker.logs.offline_partitions if broker.logs is not None else {}


def _local_epoch(broker: BrokerContext, tp: TopicPartition, epoch: int) -> int:
    """The partition state's epoch, or the log's latest if it was written under a newer one — the epoch
    the data path fences requests with (broker/replica/partition.py)."""
    try:
        partition_log = broker.logs.get_log(tp) if broker.logs is not None else None
    except Exception:
        partition_log = None
    if partition_log is not None:
        epoch = max(epoch, partition_log.epoch_cache.latest_epoch)
    return epoch
