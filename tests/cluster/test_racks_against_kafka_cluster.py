"""KIP-392 judged by Kafka on three nodes: three Apache Kafka 4.3.1 nodes (KRaft) and three Ebb brokers
on ZooKeeper, both in racks a, a, b (node ranks 0, 1, 2) with replica.selector.class set to Kafka's
RackAwareReplicaSelector, answer the same consumer Fetches (tests/differential/runner.py compares
them). A partition on [rank 0, rank 2, rank 1] is led in rack "a"; asked by a consumer of rack "b",
the leader names rank 2 as PreferredReadReplica (and reads nothing) while the fetch offset is one that
follower holds; a consumer of rack "a", of a rack with no replica, or of none is read from the leader;
an offset past every log is the leader's OFFSET_OUT_OF_RANGE; the follower serves rack "b" itself,
and a Fetch before v11 (no rack) is read by the leader."""

from __future__ import annotations

import time

import pytest

from broker.config import RACK_AWARE_SELECTOR
from protocol.messages import CreateTopicsRequest, FetchRequest
from protocol.records import build_batch
from tests.broker.data_wire import fetch_request, list_offsets_request, produce_request
from tests.cluster.three_brokers import three_brokers
from tests.differential.runner import ClusterPeer, compare
from tests.interop.conftest import TARGET, build
from tests.support.kafka_node import kafka_cluster
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(400)
TOPIC = "racked"
T0 = int(time.time() * 1000)
RACK_BY_RANK = ("a", "a", "b")
SETTINGS = {"replica.selector.class": RACK_AWARE_SELECTOR, "auto.leader.rebalance.enable": "false"}
ALLOWED: dict[tuple[str, str], str] = {("*", "error_message"): "free text"}


def _fetch(offset: int, rack: str) -> FetchRequest:
    request = fetch_request(TOPIC, 0, offset, max_bytes=1 << 20)
    request.rack_id = rack
    return request


def closest_replica(peer: ClusterPeer) -> None:
    a, b, c = (peer.node(rank) for rank in range(3))
    Topic = CreateTopicsRequest.CreatableTopic
    peer.ask("create on ranks 0, 2, 1", CreateTopicsRequest(topics=[Topic(
        name=TOPIC, num_partitions=-1, replication_factor=-1, configs=[], assignments=[
            Topic.CreatableReplicaAssignment(partition_index=0, broker_ids=[a, c, b])])], timeout_ms=30_000), 4)
    peer.wait_for_replicas(TOPIC, 1, 3)
    wait_for(lambda: peer.nodes[a].send(list_offsets_request(TOPIC, 0, -1), 7).topics[0].partitions[0]
             .error_code == 0, timeout_s=30, what=f"{peer.name}: {a} leading {TOPIC}")
    data = build_batch([(b"k%d" % i, b"v%d" % i, [], T0 + i) for i in range(10)])
    # acks=all: answered once every in-sync follower fetched past the records, so the leader knows both hold them
    peer.ask_at(a, "produce at the leader, acks=all", produce_request(TOPIC, 0, data, acks=-1), 9)
    for version in (11, 12):
        for rack in ("b", "a", "z", ""):
            for offset in (0, 10):
                peer.ask_by_node(f"v{version} leader, rack {rack!r}, offset {offset}", _fetch(offset, rack), version)
        peer.ask_by_node(f"v{version} leader, rack 'b', past the end", _fetch(11, "b"), version)
    peer.ask_by_node("v10 leader, no rack in the request", _fetch(0, "b"), 10)
    # The follower learns the high watermark at its next fetch: each cluster's own timing, waited for unrecorded
    wait_for(lambda: peer.nodes[c].send(_fetch(0, "b"), 12).responses[0].partitions[0].high_watermark == 10,
             timeout_s=30, what=f"{peer.name}: the follower's high watermark at 10")
    peer.ask_at(c, "v12 the rack 'b' follower serving rack 'b'", _fetch(0, "b"), 12)
    peer.ask_at(c, "v12 the rack 'b' follower at its high watermark", _fetch(10, "b"), 12)


def test_the_leader_names_the_follower_in_the_consumers_rack_as_kafka_does(zk_connect, tmp_path):
    build()
    per_node = {n: {"broker.rack": rack} for n, rack in zip((1, 2, 3), RACK_BY_RANK, strict=True)}
    with kafka_cluster(tmp_path / "kafka", f"{TARGET / 'lib'}/*", 3, SETTINGS, per_node) as kafka_nodes, \
            three_brokers(zk_connect, tmp_path / "ebb", SETTINGS, per_node) as ebb_brokers:
        kafka = ClusterPeer("kafka", {int(n.properties["node.id"]): n.port for n in kafka_nodes})
        ebb = ClusterPeer("ebb", {n: b.port for n, b in ebb_brokers.items()})
        try:
            found = compare(closest_replica, ebb, kafka, ALLOWED)
        finally:
            kafka.close()
            ebb.close()
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
    answers = {label: answer["responses"][0]["partitions"][0] for label, answer in ebb.answers
               if label.startswith("v1")}
    preferred = {label: p["preferred_read_replica"] for label, p in answers.items()}
    for version in (11, 12):  # what both clusters answered (the same, as compared above)
        assert preferred[f"v{version} leader, rack 'b', offset 0"] == 3
        assert preferred[f"v{version} leader, rack 'b', offset 10"] == 3
        assert answers[f"v{version} leader, rack 'a', offset 0"]["records"]
        assert preferred[f"v{version} leader, rack 'b', past the end"] == -1
        assert answers[f"v{version} leader, rack 'b', past the end"]["error_code"] == 1  # OFFSET_OUT_OF_RANGE
    assert answers["v12 the rack 'b' follower serving rack 'b'"]["records"]
