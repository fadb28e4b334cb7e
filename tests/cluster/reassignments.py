"""What the reassignment and deletion tests ask of three brokers over the wire: moving a partition
(AlterPartitionReassignments, sent to a broker that is not the controller, which forwards it), what is
under way, and whether every broker sees a partition where it should be."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

from protocol.enums import ConfigResourceType, ConfigSource
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)
from tests.broker.data_wire import WireClient, batch, fetch, produce, records
from tests.cluster.three_brokers import NODES, E, metadata_of, new_topic, partition_state
from tests.support.polling import wait_for

_Topic = AlterPartitionReassignmentsRequest.ReassignableTopic


def not_the_controller(cluster):
    controller = metadata_of(cluster[1]).controller_id
    return cluster[next(n for n in NODES if n != controller)]


def reassign(cluster, topic: str, replicas: list[int] | None, partition: int = 0) -> int:
    request = AlterPartitionReassignmentsRequest(timeout_ms=10_000, topics=[_Topic(name=topic, partitions=[
        _Topic.ReassignablePartition(partition_index=partition, replicas=replicas)])])
    answer = controller_answer(lambda: not_the_controller(cluster), request)
    assert answer.error_code == E.NONE, answer.error_message
    return answer.responses[0].partitions[0].error_code


def ongoing(cluster, topic: str, via=None) -> list:
    """Partition 0's reassignment under way, if any, asked of `via` (default: a non-controller)."""
    request = ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=[
        ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=topic, partition_indexes=[0])])
    answer = controller_answer(lambda: via or not_the_controller(cluster), request)
    assert answer.error_code == E.NONE, answer.error_message
    return [p for t in answer.topics for p in t.partitions]


def controller_answer(broker, request):
    """The answer to a request only the controller runs, sent to `broker()`; NOT_CONTROLLER (a
    controller just elected, not yet in charge) is asked again, as admin clients do."""
    answers = []

    def answered() -> bool:
        with WireClient(broker().port) as client:
            answers.append(client.send(request, 0))
        return answers[-1].error_code != E.NOT_CONTROLLER
    wait_for(answered, what="an answer from the controller")
    return answers[-1]


def moved(cluster, topic: str, replicas: list[int]) -> bool:
    """Every broker names exactly `replicas` as the partition's replicas and ISR, led by one of them."""
    states = [partition_state(b, topic) for b in cluster.values() if b.process.poll() is None]
    return all(list(s.replica_nodes) == replicas and sorted(s.isr_nodes) == sorted(replicas)
               and s.leader_id in replicas for s in states)


def live_dir(broker, topic: str) -> bool:
    return (broker.data_dir / "logs" / f"{topic}-0").exists()


def read_all(broker, topic: str, start: int = 0) -> list[bytes]:
    found, offset = [], start
    with WireClient(broker.port) as client:
        while True:
            part = fetch(client, topic, 0, offset)
            got = records(part)
            if not got:
                return found
            found += [r.value for r in got]
            offset = got[-1].offset + 1


def two_replica_topic(cluster, prefix: str) -> tuple[str, list[int]]:
    name = new_topic(cluster, prefix=prefix)
    replicas = list(partition_state(cluster[1], name).replica_nodes)
    assert reassign(cluster, name, replicas[:2]) == E.NONE  # drop to two replicas: the third leaves
    wait_for(lambda: moved(cluster, name, replicas[:2]), what="the topic down to two replicas")
    wait_for(lambda: not live_dir(cluster[replicas[2]], name), what="the dropped replica's log deleted")
    return name, replicas[:2]


@contextlib.contextmanager
def paused(cluster, topic: str, node: int) -> Iterator[None]:
    """Broker `node` stopped in its tracks (SIGSTOP): still registered for a few seconds, but it fetches
    nothing, so a reassignment onto it stays under way. Never the controller, which must answer: a
    controller is restarted first so that another broker takes over."""
    if metadata_of(cluster[1]).controller_id == node:
        cluster[node].restart()
        others = [b for n, b in cluster.items() if n != node]
        wait_for(lambda: metadata_of(others[0]).controller_id not in (node, -1), what="another controller")
        wait_for(lambda: node in [b.node_id for b in metadata_of(others[0]).brokers], what="the broker back")
        replicas = list(partition_state(others[0], topic).replica_nodes)
        wait_for(lambda: moved(cluster, topic, replicas), what="the partition in sync again")
    cluster[node].process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        cluster[node].process.send_signal(signal.SIGCONT)


def produce_each(broker, topic: str, values: list[bytes]) -> None:
    """One batch per value to partition 0, each acknowledged by every in-sync replica."""
    with WireClient(broker.port) as client:
        for value in values:
            assert produce(client, topic, 0, batch([value]), acks=-1).error_code == E.NONE


def alter_configs(broker, resource_type: ConfigResourceType, name: str, changes: dict[str, str | None]) -> None:
    """IncrementalAlterConfigs through `broker`: SET each key to its value, DELETE it where None (a
    broker's own configs must be altered through that broker)."""
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(resources=[Resource(resource_type=resource_type, resource_name=name,
                                                                 configs=[
        Resource.AlterableConfig(name=k, config_operation=0 if v is not None else 1, value=v)
        for k, v in changes.items()])], validate_only=False)
    with WireClient(broker.port) as client:
        [result] = client.request(request, 1).responses
    assert result.error_code == E.NONE, result.error_message


def set_configs(broker, resource_type: ConfigResourceType, name: str) -> dict[str, str]:
    """The configs set on a resource (topic overrides, a broker's own dynamic configs), asked of `broker`."""
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None)])
    with WireClient(broker.port) as client:
        [result] = client.request(request, 4).results
    assert result.error_code == E.NONE, result.error_message
    own = ConfigSource.DYNAMIC_TOPIC_CONFIG if resource_type == ConfigResourceType.TOPIC \
        else ConfigSource.DYNAMIC_BROKER_CONFIG
    return {c.name: c.value for c in result.configs if c.config_source == own}
