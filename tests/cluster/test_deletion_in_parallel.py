"""The last four of KAFKA-330's topic deletion tests (the first three are in test_topic_deletion.py),
named after the seed's words, on one cluster of three broker processes and a real ZooKeeper:

4. request handling during topic deletion: Produce, Fetch and Metadata answer as for a topic that is
   gone, and Metadata with auto-creation does not bring it back while the deletion waits;
5. topic deletion and partition reassignment in parallel: the deletion of a topic whose partition is
   moving halts (the topic is still served, DeleteTopics times out) and resumes when the move is
   done; a reassignment of the marked topic is refused;
6. topic deletion and preferred replica election in parallel: both answer, the topic goes, and the
   election writes no state that outlives it;
7. topic deletion and per-topic config changes in parallel: a config change neither blocks the
   deletion nor brings the topic (or its configs) back.
"""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient

from protocol.enums import ElectionType
from protocol.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from tests.broker.data_wire import WireClient, batch, fetch_request, produce
from tests.cluster.reassignments import live_dir, moved, ongoing, paused, reassign, two_replica_topic
from tests.cluster.three_brokers import NODES, E, metadata_of, new_topic, partition_state, three_brokers
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)
CHROOT = "/deletion-in-parallel"


@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory):
    with three_brokers(f"{zk_server.connect}{CHROOT}", tmp_path_factory.mktemp("deletion-in-parallel"),
                       extra={"auto.leader.rebalance.enable": "false"}) as brokers:
        yield brokers


@pytest.fixture(scope="module")
def zookeeper(zk_server):
    client = KazooClient(f"{zk_server.connect}{CHROOT}")
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def delete(broker, name: str, timeout_ms: int):
    with WireClient(broker.port) as client:
        [result] = client.send(DeleteTopicsRequest(topic_names=[name], timeout_ms=timeout_ms), 4).responses
    return result.error_code


def known(broker, name: str) -> int:
    """The topic's error code in the broker's metadata (no auto-creation)."""
    with WireClient(broker.port) as client:
        reply = client.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                            allow_auto_topic_creation=False), 12)
    return reply.topics[0].error_code


def gone(cluster, zookeeper, name: str) -> bool:
    alive = [b for b in cluster.values() if b.process.poll() is None]
    return (all(known(b, name) == E.UNKNOWN_TOPIC_OR_PARTITION for b in alive)
            and not any(zookeeper.exists(path) for path in (f"/brokers/topics/{name}", f"/config/topics/{name}",
                                                             f"/admin/delete_topics/{name}"))
            and not any(live_dir(b, name) for b in alive))


def test_request_handling_during_topic_deletion(cluster, zookeeper):
    name = new_topic(cluster, prefix="requested")
    down = partition_state(cluster[1], name).replica_nodes[-1]
    asked = cluster[next(n for n in NODES if n != down)]
    cluster[down].stop()
    try:
        assert delete(asked, name, timeout_ms=500) == E.REQUEST_TIMED_OUT  # waits for the stopped replica
        assert zookeeper.exists(f"/admin/delete_topics/{name}")
        for broker in (b for n, b in cluster.items() if n != down):
            with WireClient(broker.port) as client:
                assert produce(client, name, 0, batch([b"late"]), acks=-1).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
                fetched = client.send(fetch_request(name, 0, 0), 12).responses[0].partitions[0]
                assert fetched.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
                auto = client.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                                   allow_auto_topic_creation=True), 12).topics[0]
                assert auto.error_code != E.NONE  # never created again while the deletion waits
            assert known(broker, name) == E.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        cluster[down].start()
    wait_for(lambda: gone(cluster, zookeeper, name), what="the deletion finished once the replica returned")


def test_topic_deletion_and_partition_reassignment_in_parallel(cluster, zookeeper):
    name, original = two_replica_topic(cluster, "moved-and-deleted")
    joining = next(n for n in NODES if n not in original)
    with paused(cluster, name, joining):
        assert reassign(cluster, name, [original[0], joining]) == E.NONE
        assert delete(cluster[original[0]], name, timeout_ms=1000) == E.REQUEST_TIMED_OUT  # halted
        assert zookeeper.exists(f"/admin/delete_topics/{name}")
        assert known(cluster[original[0]], name) == E.NONE  # still served while it moves
        assert live_dir(cluster[original[1]], name)
        assert len(ongoing(cluster, name)) == 1
        assert reassign(cluster, name, [original[1], joining]) == E.UNKNOWN_TOPIC_OR_PARTITION  # marked
    # the joining broker catches up, the move completes, and the deletion resumes
    wait_for(lambda: gone(cluster, zookeeper, name), timeout_s=60, what="the deletion resumed and finished")


def test_topic_deletion_and_preferred_replica_election_in_parallel(cluster, zookeeper):
    name = new_topic(cluster, prefix="elected-and-deleted")
    replicas = list(partition_state(cluster[1], name).replica_nodes)
    reordered = replicas[1:] + replicas[:1]
    assert reassign(cluster, name, reordered) == E.NONE  # only reorders: done at once, the leader stays
    wait_for(lambda: list(partition_state(cluster[1], name).replica_nodes) == reordered, what="reordered")
    assert partition_state(cluster[1], name).leader_id != reordered[0]  # a preferred election is due
    election: list[int] = []

    def elect() -> None:
        request = ElectLeadersRequest(election_type=ElectionType.PREFERRED, timeout_ms=10_000, topic_partitions=[
            ElectLeadersRequest.TopicPartitions(topic=name, partitions=[0])])
        with WireClient(cluster[reordered[1]].port) as client:
            election.append(client.send(request, 2).replica_election_results[0].partition_result[0].error_code)

    electing = threading.Thread(target=elect)
    electing.start()
    deleted = delete(cluster[reordered[2]], name, timeout_ms=20_000)
    electing.join()
    assert deleted == E.NONE
    assert election[0] in (E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_CONTROLLER)
    wait_for(lambda: gone(cluster, zookeeper, name), what="the topic gone, no state left behind")
    assert not zookeeper.exists(f"/brokers/topics/{name}/partitions/0/state")


def test_topic_deletion_and_per_topic_config_changes_in_parallel(cluster, zookeeper):
    name = new_topic(cluster, prefix="configured-and-deleted")
    down = partition_state(cluster[1], name).replica_nodes[-1]
    asked = cluster[next(n for n in NODES if n != down)]
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    change = IncrementalAlterConfigsRequest(validate_only=False, resources=[Resource(
        resource_type=2, resource_name=name,
        configs=[Resource.AlterableConfig(name="retention.ms", config_operation=0, value="12345")])])
    cluster[down].stop()
    try:
        assert delete(asked, name, timeout_ms=500) == E.REQUEST_TIMED_OUT
        with WireClient(asked.port) as client:
            [answer] = client.send(change, 1).responses
        assert answer.error_code == E.UNKNOWN_TOPIC_OR_PARTITION  # a topic being deleted takes no changes
    finally:
        cluster[down].start()
    wait_for(lambda: gone(cluster, zookeeper, name), what="the deletion finished despite the change")
    with WireClient(asked.port) as client:  # created again: nothing of the old topic's configs comes back
        created = client.send(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=-1, configs=[])], timeout_ms=10_000), 7).topics[0]
    assert created.error_code == E.NONE
    assert not zookeeper.exists(f"/config/topics/{name}") or b"12345" not in zookeeper.get(f"/config/topics/{name}")[0]
    wait_for(lambda: moved(cluster, name, list(partition_state(asked, name).replica_nodes)), what="the new topic up")
    assert all(metadata_of(b, [name]).topics[0].error_code == E.NONE for b in cluster.values())
