"""Kafka as the judge on three nodes: three Apache Kafka 4.3.1 nodes (KRaft, from the pinned jars) and
three Ebb brokers on ZooKeeper answer the same requests about a topic replicated three ways — sent to
a partition's leader and to its followers — the same way (tests/differential/runner.py compares them;
which node leads, and node ids in replica lists, are each cluster's own).

What only a cluster shows: an all-replica DeleteRecords answered once every replica has the new start,
the followers then answering ListOffsets for the debugging replica id (-2) from their own logs with
that start, the leader-only APIs refused by followers, a consumer's Fetch from v11 served by a
follower up to its high watermark (KIP-392; this scenario found Ebb refusing it), and a group's
offsets committed and fetched at its coordinator and refused by the other brokers.
"""

from __future__ import annotations

import time

import pytest

from protocol.messages import (
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DescribeClusterRequest,
    FetchRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
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
    with kafka_cluster(tmp_path / "kafka", f"{TARGET / 'lib'}/*", 3) as kafka_nodes, \
            three_brokers(zk_connect, tmp_path / "ebb") as ebb_brokers:
        kafka = ClusterPeer("kafka", {int(n.properties["node.id"]): n.port for n in kafka_nodes})
        ebb = ClusterPeer("ebb", {n: b.port for n, b in ebb_brokers.items()})
        try:
            found = compare(three_way_replicated, ebb, kafka, ALLOWED)
        finally:
            kafka.close()
            ebb.close()
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
