"""Kafka as the judge on three nodes: three Apache Kafka 4.3.1 nodes (KRaft, from the pinned jars) and
three Ebb brokers on ZooKeeper answer the same requests about a topic replicated three ways — sent to
a partition's leader and to its followers — the same way (tests/differential/runner.py compares them;
which node leads, and node ids in replica lists, are each cluster's own).

What only a cluster shows: an all-replica DeleteRecords answered once every replica has the new start,
the followers then answering ListOffsets for the debugging replica id (-2) from their own logs with
that start, the leader-only APIs refused by followers, a consumer's Fetch from v11 served by a
follower up to its high watermark (KIP-392; this scenario found Ebb refusing it), and a group's
offsets committed and fetched at its coordinator and refused by the other brokers.

Then partitions moved and leaders elected (`moved_and_elected`): placements and reassignment targets
name nodes by rank (`ClusterPeer.node`), so replica lists and leaders are compared node for node
(`ClusterPeer.ask_by_node`). Both clusters run without automatic leader rebalancing, so that only the
ElectLeaders asked moves a leader.
"""

from __future__ import annotations

import time

import pytest

from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DescribeClusterRequest,
    DescribeTopicPartitionsRequest,
    ElectLeadersRequest,
    FetchRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from protocol.records import build_batch
from tests.broker.data_wire import delete_records_request, fetch_request, list_offsets_request, produce_request
from tests.cluster.three_brokers import three_brokers
from tests.differential.runner import ClusterPeer, compare
from tests.interop.conftest import TARGET, build
from tests.support.kafka_node import kafka_cluster
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(400)
TOPIC = "judged"
# The records' CreateTime: recent, because a retention pass (30 s after a broker starts) rolls and deletes
# a segment whose records are all older than retention.ms (7 days) on either broker, at its own moment.
T0 = int(time.time() * 1000)
ALLOWED: dict[tuple[str, str], str] = {
    ("*", "error_message"): "free text: whether a message is given and its wording are Kafka's own choice",
}


def three_way_replicated(peer: ClusterPeer) -> None:
    Topic = CreateTopicsRequest.CreatableTopic
    peer.ask("create, three replicas", CreateTopicsRequest(topics=[Topic(
        name=TOPIC, num_partitions=2, replication_factor=3, configs=[])], timeout_ms=30_000), 4)
    peer.wait_for_replicas(TOPIC, 2, 3)
    peer.ask("metadata", MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]), 12)
    peer.ask("describe cluster", DescribeClusterRequest(include_cluster_authorized_operations=False), 0)
    placement = {p: peer.replicas(TOPIC, p) for p in (0, 1)}
    for p, (leader, followers) in placement.items():
        data = build_batch([(b"k%d" % i, b"v%d" % i, [], T0 + i) for i in range(10)])
        peer.ask_at(followers[0], f"produce {p} at a follower", produce_request(TOPIC, p, data, acks=-1), 9)
        peer.ask_at(leader, f"produce {p} at the leader, acks=all", produce_request(TOPIC, p, data, acks=-1), 9)
    for p, (leader, followers) in placement.items():
        delete = _delete_records(p, 4 if p == 0 else -1)
        peer.ask_at(followers[0], f"delete records {p} at a follower", delete, 2)
        peer.ask_at(leader, f"delete records {p} at the leader (all replicas)", delete, 2)
    for p, (leader, followers) in placement.items():
        peer.ask_at(leader, f"earliest {p} at the leader", _list_offsets(p, -2, replica_id=-1), 7)
        peer.ask_at(followers[0], f"earliest {p} at a follower, as a consumer", _list_offsets(p, -2, replica_id=-1), 7)
        for n, follower in enumerate(followers):  # each follower knows the start the delete waited for
            peer.ask_at(follower, f"earliest {p} at follower {n}, debugging id", _list_offsets(p, -2, replica_id=-2), 7)
        peer.ask_at(leader, f"fetch {p} below the start at the leader", _fetch(p, 0), 12)
        peer.ask_at(followers[0], f"fetch {p} at a follower, as a consumer", _fetch(p, 4), 12)
        peer.ask_at(followers[0], f"fetch {p} at a follower, as a consumer before v11", _fetch(p, 4), 10)
    group_offsets_at_their_coordinator(peer)


def group_offsets_at_their_coordinator(peer: ClusterPeer) -> None:
    group = "judged-group"
    found = wait_for(lambda: (f := peer.send(FindCoordinatorRequest(key=group, key_type=0), 3)).error_code == 0
                     and f, timeout_s=60, what=f"{peer.name}: a coordinator for {group}")  # offsets topic coming up
    coordinator, other = found.node_id, next(n for n in peer.nodes if n != found.node_id)
    wait_for(lambda: peer.nodes[coordinator].send(_commit(group, 2), 8).topics[0].partitions[0].error_code == 0,
             timeout_s=60, what=f"{peer.name}: {coordinator} taking commits of {group}")  # still loading
    peer.ask("find coordinator", FindCoordinatorRequest(key=group, key_type=0), 3)
    peer.ask_at(other, "commit at a broker that does not coordinate the group", _commit(group, 7), 8)
    peer.ask_at(coordinator, "commit at the coordinator", _commit(group, 7), 8)
    peer.ask_at(coordinator, "fetch the commit at the coordinator", _offset_fetch(group), 8)
    peer.ask_at(other, "fetch at a broker that does not coordinate the group", _offset_fetch(group), 8)


MOVED = "judged-reordered"  # three replicas, [a, b, c] reordered to [b, c, a]
SHIFTED = "judged-shifted"  # two replicas: [a, b] moved to [b, c], reordered to [c, b], grown to [c, b, a]
# In both clusters a leader moves only when the scenario asks (else a check every 300 s may, mid-scenario).
NO_AUTO_REBALANCE = {"auto.leader.rebalance.enable": "false"}


def moved_and_elected(peer: ClusterPeer) -> None:
    a, b, c = (peer.node(rank) for rank in range(3))
    Topic = CreateTopicsRequest.CreatableTopic

    def placed(name: str, replicas: list[int]) -> CreateTopicsRequest.CreatableTopic:
        return Topic(name=name, num_partitions=-1, replication_factor=-1, configs=[], assignments=[
            Topic.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)])
    peer.ask("create, placed by rank", CreateTopicsRequest(topics=[placed(MOVED, [a, b, c]), placed(SHIFTED, [a, b])],
                                                           timeout_ms=30_000), 4)
    _wait_for_placement(peer, {MOVED: [a, b, c], SHIFTED: [a, b]}, preferred_leads=True)
    data = build_batch([(b"k%d" % i, b"v%d" % i, [], T0 + i) for i in range(10)])
    for name in (MOVED, SHIFTED):  # a Kafka node's metadata may name it leader before its replica leads
        wait_for(lambda name=name: peer.nodes[a].send(list_offsets_request(name, 0, -1), 7).topics[0].partitions[0]
                 .error_code == 0, timeout_s=30, what=f"{peer.name}: {a} leading {name}")
        peer.ask_at(a, f"produce to {name}, acks=all", produce_request(name, 0, data, acks=-1), 9)
    peer.ask("reorder the three replicas (v0)", _reassign({MOVED: [b, c, a]}), 0)
    peer.ask("reordered: nothing is moving", _list([MOVED]), 0)  # no replica joins: done at once on both
    peer.ask("replication factor changed though not allowed (v1)", _reassign({SHIFTED: [b]}, allow_change=False), 1)
    peer.ask("move two replicas to another broker set (v1)", _reassign({SHIFTED: [b, c]}), 1)
    while_moving = peer.send(_list(None), 0)  # whether the move is still listed is each cluster's timing
    peer.answers.append(("list while moving: its errors", {"error_code": while_moving.error_code}))
    _wait_for_moves(peer, {MOVED: [b, c, a], SHIFTED: [b, c]})  # altered again in flight, the leader would be
    peer.ask_at(c, "alter the same partition again, at another node (v0)", _reassign({SHIFTED: [c, b]}), 0)
    _wait_for_moves(peer, {MOVED: [b, c, a], SHIFTED: [c, b]})
    for rank, node in enumerate((a, b, c)):  # each node that is not the controller forwards it
        peer.ask_at(node, f"list once done, at node {rank}", _list(None), 0)
    peer.ask("list once done, named", _list([MOVED, SHIFTED, "never-was"]), 0)
    for v in (0, 1):
        peer.ask_at(b, f"cancel a finished reassignment (v{v})", _reassign({SHIFTED: None}), v)
    peer.ask_at(c, "a third replica, the replication factor changed (v1)", _reassign({SHIFTED: [c, b, a]}), 1)
    _wait_for_moves(peer, {MOVED: [b, c, a], SHIFTED: [c, b, a]})
    _judge_placement(peer, "after the moves")
    for name, new_first in ((MOVED, b), (SHIFTED, c)):  # the data came along: the new replicas hold it
        peer.ask_at(new_first, f"latest of {name} at its new first replica, debugging id",
                    list_offsets_request(name, 0, -1, replica_id=-2), 7)
    peer.ask("elect the preferred leaders (v0)", _elect([MOVED, SHIFTED]), 0)
    _wait_for_placement(peer, {MOVED: [b, c, a], SHIFTED: [c, b, a]}, preferred_leads=True)
    for v in (1, 2):
        peer.ask_at(b, f"elect the preferred leaders again (v{v})", _elect([MOVED, SHIFTED, "never-was"]), v)
        peer.ask_at(c, f"elect unclean leaders of led partitions (v{v})", _elect([MOVED, SHIFTED], unclean=True), v)
    _judge_placement(peer, "after the election")


def _judge_placement(peer: ClusterPeer, when: str) -> None:
    topics = [MOVED, SHIFTED]
    peer.ask_by_node(f"metadata {when}", MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name=t) for t in topics]), 12)
    peer.ask_by_node(f"describe topic partitions {when}", DescribeTopicPartitionsRequest(topics=[
        DescribeTopicPartitionsRequest.TopicRequest(name=t) for t in topics]), 0)


def _wait_for_moves(peer: ClusterPeer, replicas: dict[str, list[int]]) -> None:
    wait_for(lambda: not peer.send(_list(None), 0).topics, timeout_s=60, what=f"{peer.name}: reassignments done")
    _wait_for_placement(peer, replicas)


def _wait_for_placement(peer: ClusterPeer, replicas: dict[str, list[int]], preferred_leads: bool = False) -> None:
    """Every node's metadata has each topic's partition 0 on `replicas`, in that order, all in sync and
    led (by the first replica if `preferred_leads`), unrecorded."""
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in replicas])

    def placed() -> bool:
        for client in peer.nodes.values():
            for topic in client.send(request, 12).topics:
                p = topic.partitions[0] if topic.error_code == 0 and topic.partitions else None
                want = replicas[topic.name]
                if p is None or list(p.replica_nodes) != want or sorted(p.isr_nodes) != sorted(want) or (
                        p.leader_id != want[0] if preferred_leads else p.leader_id not in want):
                    return False
        return True
    wait_for(placed, timeout_s=60, what=f"{peer.name}: {replicas} in sync in every node's metadata")


def _reassign(targets: dict[str, list[int] | None], allow_change: bool = True) -> AlterPartitionReassignmentsRequest:
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    return AlterPartitionReassignmentsRequest(timeout_ms=30_000, allow_replication_factor_change=allow_change, topics=[
        Topic(name=name, partitions=[Topic.ReassignablePartition(partition_index=0, replicas=target)])
        for name, target in targets.items()])


def _list(topics: list[str] | None) -> ListPartitionReassignmentsRequest:
    Topic = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    return ListPartitionReassignmentsRequest(timeout_ms=30_000, topics=None if topics is None else [
        Topic(name=name, partition_indexes=[0]) for name in topics])


def _elect(topics: list[str], unclean: bool = False) -> ElectLeadersRequest:
    Topic = ElectLeadersRequest.TopicPartitions
    return ElectLeadersRequest(election_type=1 if unclean else 0, timeout_ms=30_000, topic_partitions=[
        Topic(topic=name, partitions=[0]) for name in topics])


def _commit(group: str, offset: int) -> OffsetCommitRequest:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                               retention_time_ms=-1, topics=[T(name=TOPIC, partitions=[T.OffsetCommitRequestPartition(
                                   partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                   committed_metadata="")])])


def _offset_fetch(group: str) -> OffsetFetchRequest:
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    return OffsetFetchRequest(groups=[G(group_id=group, topics=[G.OffsetFetchRequestTopics(
        name=TOPIC, partition_indexes=[0])])], require_stable=False)


def _delete_records(partition: int, offset: int) -> DeleteRecordsRequest:
    return delete_records_request({TOPIC: {partition: offset}}, timeout_ms=30_000)


def _list_offsets(partition: int, timestamp: int, replica_id: int) -> ListOffsetsRequest:
    return list_offsets_request(TOPIC, partition, timestamp, replica_id=replica_id)


def _fetch(partition: int, offset: int) -> FetchRequest:
    return fetch_request(TOPIC, partition, offset, max_bytes=1 << 20)


def test_three_nodes_answer_as_kafka_does(zk_connect, tmp_path):
    build()  # the Kafka jars tests/interop/java pins (Maven, cached)
    with kafka_cluster(tmp_path / "kafka", f"{TARGET / 'lib'}/*", 3, NO_AUTO_REBALANCE) as kafka_nodes, \
            three_brokers(zk_connect, tmp_path / "ebb", NO_AUTO_REBALANCE) as ebb_brokers:
        kafka = ClusterPeer("kafka", {int(n.properties["node.id"]): n.port for n in kafka_nodes})
        ebb = ClusterPeer("ebb", {n: b.port for n, b in ebb_brokers.items()})
        try:
            found = compare(three_way_replicated, ebb, kafka, ALLOWED)
            found += compare(moved_and_elected, ebb, kafka, ALLOWED)
        finally:
            kafka.close()
            ebb.close()
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
