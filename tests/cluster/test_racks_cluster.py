"""Racks on three brokers (1 and 2 in rack "a", 3 in rack "b"), with replica.selector.class set to
Kafka's RackAwareReplicaSelector: Metadata and DescribeCluster name each broker's rack; CreateTopics
and CreatePartitions stripe replicas over the racks (broker/striped_placement.py); a librdkafka
consumer with client.rack=b reads a partition led in rack "a" from the follower in its own rack (the
follower's consumer byte counter moves, the leader's does not), and when that follower stops it goes on
from the leader with no record lost or read twice; a fetch parked at the leader is sent to the follower
that came back in sync while it waited. One cluster for the module."""

from __future__ import annotations

import signal

import pytest

from broker.config import RACK_AWARE_SELECTOR
from protocol.errors import ErrorCode
from protocol.messages import CreatePartitionsRequest, CreateTopicsRequest, DescribeClusterRequest
from tests.broker.data_wire import WireClient
from tests.cluster.three_brokers import create_assigned, in_sync, metadata_of, partition_state, three_brokers
from tests.support.broker_process import free_port
from tests.support.metrics_scrape import scrape, value
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(240)
RACKS = {1: "a", 2: "a", 3: "b"}
E = ErrorCode


@pytest.fixture(scope="module")
def racked(zk_server, tmp_path_factory):
    ports = {n: free_port() for n in RACKS}
    per_node = {n: {"broker.rack": rack, "ebb.metrics.listener": f"http://127.0.0.1:{ports[n]}"}
                for n, rack in RACKS.items()}
    with three_brokers(zk_server.connect + "/racks", tmp_path_factory.mktemp("racks"),
                       {"replica.selector.class": RACK_AWARE_SELECTOR}, per_node) as cluster:
        yield cluster, {n: f"http://127.0.0.1:{port}/metrics" for n, port in ports.items()}


def test_metadata_and_describe_cluster_name_the_racks(racked):
    cluster, _ = racked
    for broker in cluster.values():
        assert {b.node_id: b.rack for b in metadata_of(broker).brokers} == RACKS
        with WireClient(broker.port) as client:
            described = client.request(DescribeClusterRequest(include_cluster_authorized_operations=False), 0)
        assert {b.broker_id: b.rack for b in described.brokers} == RACKS


def _replicas(cluster, topic: str) -> dict[int, list[int]]:
    [found] = metadata_of(cluster[1], [topic]).topics
    return {p.partition_index: list(p.replica_nodes) for p in found.partitions}


def test_placement_spreads_replicas_over_racks(racked):
    cluster, _ = racked
    Topic = CreateTopicsRequest.CreatableTopic
    with WireClient(cluster[2].port) as client:
        topics = [Topic(name="striped2", num_partitions=6, replication_factor=2),
                  Topic(name="striped3", num_partitions=4, replication_factor=3)]
        answer = client.request(CreateTopicsRequest(topics=topics, timeout_ms=10_000), 7)
        assert [t.error_code for t in answer.topics] == [E.NONE, E.NONE]
        grown = client.request(CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="striped2", count=10, assignments=None)], timeout_ms=10_000, validate_only=False), 3)
        assert grown.results[0].error_code == E.NONE
    wait_for(lambda: len(_replicas(cluster, "striped2")) == 10, what="the grown partitions in the metadata")
    two = _replicas(cluster, "striped2")
    # Round robin would put partition 0 on brokers 1 and 2, both in rack "a": striping never does
    assert all(sorted(RACKS[b] for b in replicas) == ["a", "b"] for replicas in two.values()), two
    # Leaders go round the racks: each rack leads in every round of as many partitions as brokers
    for first in (0, 3):
        assert {RACKS[two[p][0]] for p in range(first, first + 3)} == {"a", "b"}, two
    assert all(sorted(replicas) == [1, 2, 3] for replicas in _replicas(cluster, "striped3").values())


def _bytes_out(url: str, topic: str) -> float:
    return value(scrape(url), "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) or 0.0


def test_a_consumer_reads_from_the_follower_in_its_rack_then_from_the_leader(racked):
    import confluent_kafka
    cluster, urls = racked
    topic = "near"
    create_assigned(cluster[1].port, topic, [1, 3, 2], {})  # led in rack "a"; broker 3 is rack "b"'s copy
    wait_for(lambda: all(in_sync(b, topic, 0) for b in cluster.values()), what="three replicas in sync")
    bootstrap = ",".join(b.bootstrap for b in cluster.values())
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})

    def produce(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce(topic, value=b"m%d" % i, partition=0)
        assert producer.flush(30) == 0

    produce(0, 200)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "near-readers",
                                         "client.rack": "b", "enable.auto.commit": False,
                                         "socket.connection.setup.timeout.ms": 2000, "reconnect.backoff.max.ms": 500})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    seen: list[tuple[int, bytes]] = []

    def read(count: int) -> None:
        def more() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append((message.offset(), message.value()))
            return len(seen) >= count
        wait_for(more, timeout_s=90, interval_s=0, what=f"{count} records read")

    try:
        read(200)
        assert _bytes_out(urls[3], topic) > 0  # the follower in the consumer's rack served it
        assert _bytes_out(urls[1], topic) == 0  # the leader only pointed it there
        assert _bytes_out(urls[2], topic) == 0
        cluster[3].stop(signal.SIGTERM)
        produce(200, 200)
        read(400)
        assert _bytes_out(urls[1], topic) > 0  # back to the leader
    finally:
        consumer.close()
        if cluster[3].process is not None and cluster[3].process.poll() is not None:
            cluster[3].start()
    assert [offset for offset, _ in seen] == list(range(400))  # none lost, none twice, in order
    assert [v for _, v in seen] == [b"m%d" % i for i in range(400)]


def _parked_fetches(url: str) -> float:
    return value(scrape(url), "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                 delayedOperation="Fetch") or 0.0


def test_a_parked_fetch_is_sent_to_the_follower_that_caught_up_while_it_waited(racked):
    """A consumer in rack "b" at the end of a partition whose rack-"b" follower is out of the ISR waits at
    the leader; the follower comes back in sync, then a record arrives: the answer names the follower
    instead of carrying the record from the leader (Kafka asks the selector again when a wait ends)."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.broker.data_wire import batch, fetch_request, produce_request

    cluster, urls = racked
    topic = "parked"
    create_assigned(cluster[1].port, topic, [1, 3, 2], {})
    wait_for(lambda: all(in_sync(b, topic, 0) for b in cluster.values()), what="three replicas in sync")
    cluster[3].stop(signal.SIGTERM)
    wait_for(lambda: 3 not in partition_state(cluster[1], topic).isr_nodes, what="broker 3 out of the ISR")
    request = fetch_request(topic, 0, 0, max_wait_ms=60_000)
    request.rack_id = "b"
    with WireClient(cluster[1].port) as waiting, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(waiting.request, request, 12)
        wait_for(lambda: _parked_fetches(urls[1]) >= 1, what="the consumer's fetch parked at the leader")
        cluster[3].start()
        wait_for(lambda: all(in_sync(b, topic, 0) for b in (cluster[1], cluster[3])), timeout_s=60,
                 what="broker 3 back in the ISR")
        assert not answer.done()
        with WireClient(cluster[1].port) as producer:
            produced = producer.request(produce_request(topic, 0, batch([b"late"]), acks=1), 9)
        assert produced.responses[0].partition_responses[0].error_code == E.NONE
        reply = answer.result(timeout=60).responses[0].partitions[0]
    assert (reply.error_code, reply.preferred_read_replica) == (E.NONE, 3)
    assert not reply.records
