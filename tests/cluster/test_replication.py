"""Three broker processes on a real ZooKeeper, replicating over Fetch (broker/replica/fetcher.py) and led
by an elected controller (broker/cluster/controller.py).

Checked through the wire: every broker lists the three brokers and the same leaders; what the leader
acknowledged with acks=-1 is in every follower's segment files, byte for byte the leader's batches;
DeleteRecords answers with a low watermark every replica has reached and each follower has the new log
start offset in its log-start-offset-checkpoint; a leader killed with SIGKILL is replaced by an in-sync
follower at the next leader epoch without losing an acknowledged record; the broker that comes back
follows, catches up and rejoins the ISR; a killed controller is replaced. Plus a real client
(librdkafka) producing with acks=all and consuming through the cluster.
"""

from __future__ import annotations

import json
import signal

import pytest

from broker.group.offsets_store import OFFSETS_TOPIC, partition_for
from protocol.messages import CreateTopicsRequest, IncrementalAlterConfigsRequest
from tests.broker.data_wire import (
    WireClient,
    batch,
    delete_records,
    fetch,
    fetch_request,
    list_offsets,
    produce,
    values,
)
from tests.broker.group_wire import commit, find_coordinator
from tests.broker.group_wire import fetch as fetch_offsets
from tests.cluster.three_brokers import (
    NODES,
    E,
    create_assigned,
    in_sync,
    leader_of,
    metadata_of,
    new_topic,
    partition_state,
    segment_batches,
    start_offset_checkpoint,
    three_brokers,
)
from tests.support.broker_process import BrokerProcess
from tests.support.held_load import HeldLoad
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(180)
_Resource = IncrementalAlterConfigsRequest.AlterConfigsResource


@pytest.fixture
def cluster(restored_three_brokers):
    """The module's cluster: each test makes its own topics and groups; one that kills a broker has it
    started again after (`restore`), so the next test finds three brokers and a controller."""
    return restored_three_brokers


@pytest.fixture
def own_cluster(zk_connect, tmp_path):
    """A cluster for one test that changes more than a broker's liveness (a config of the offsets topic,
    a registration rewritten behind the broker's back)."""
    with three_brokers(zk_connect, tmp_path) as brokers:
        yield brokers


# The two tests on their own clusters come first: the module's shared cluster starts after them, so the
# machine never runs both.


def _require_two_in_sync(broker: BrokerProcess, topic: str) -> None:
    with WireClient(broker.port) as client:
        reply = client.send(IncrementalAlterConfigsRequest(resources=[_Resource(
            resource_type=2, resource_name=topic, configs=[_Resource.AlterableConfig(
                name="min.insync.replicas", config_operation=0, value="2")])], validate_only=False), 1)
    assert reply.responses[0].error_code == E.NONE


def _commit_via_coordinator(broker: BrokerProcess, group: str, offsets: dict[tuple[str, int], int]):
    """Commit on `broker` once it coordinates the group and has loaded it; None until then."""
    with WireClient(broker.port) as client:
        found = find_coordinator(client, group)
        if found.error_code != E.NONE or found.port != broker.port:
            return None
        answer = commit(client, group, offsets)
    moving = {E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS}
    return None if set(answer.values()) & moving else answer


def test_min_insync_replicas_with_followers_gone(own_cluster):
    """RF 3, min.insync.replicas 2: one follower down still takes acks=-1 writes; with both down the
    leader (once it has dropped them from the ISR) refuses them, and acks=1 still works. The group
    coordinator's writes obey the same minimum (Kafka checks it in the partition, for every writer):
    an OffsetCommit is COORDINATOR_NOT_AVAILABLE, as Kafka answers it, and stores nothing."""
    cluster = own_cluster
    topic = new_topic(cluster)
    leader = leader_of(cluster, topic)
    _require_two_in_sync(leader, topic)
    group = "min-isr-group"
    with WireClient(leader.port) as client:
        assert find_coordinator(client, group).error_code in (E.NONE, E.COORDINATOR_NOT_AVAILABLE)  # creates it
    wait_for(lambda: all(in_sync(b, OFFSETS_TOPIC, p) for b in cluster.values() for p in range(3)),
             what="the offsets topic in sync everywhere")
    _require_two_in_sync(leader, OFFSETS_TOPIC)
    followers = [n for n, b in cluster.items() if b is not leader]
    cluster[followers[0]].stop(signal.SIGKILL)
    wait_for(lambda: len(partition_state(leader, topic).isr_nodes) == 2, what="the ISR down to two")
    assert produce_to_leader(cluster, topic, [b"two"], via=leader).error_code == E.NONE
    cluster[followers[1]].stop(signal.SIGKILL)
    me = leader_id(cluster, leader)
    wait_for(lambda: partition_state(leader, topic).isr_nodes == [me], what="the ISR down to the leader")
    assert produce_to_leader(cluster, topic, [b"one"], via=leader).error_code == E.NOT_ENOUGH_REPLICAS
    assert produce_to_leader(cluster, topic, [b"one"], via=leader, acks=1).error_code == E.NONE

    offsets_partition = partition_for(group, 3)
    wait_for(lambda: partition_state(leader, OFFSETS_TOPIC, offsets_partition).isr_nodes == [me],
             what="the group's offsets partition led here with an ISR of one")
    refused = wait_for(lambda: _commit_via_coordinator(leader, group, {(topic, 0): 1}), what="the coordinator here")
    assert refused == {(topic, 0): E.COORDINATOR_NOT_AVAILABLE}
    with WireClient(leader.port) as client:
        error, committed = fetch_offsets(client, group, {topic: [0]})
    assert error == E.NONE and committed[(topic, 0)][0] == -1  # nothing was stored


def leader_id(cluster, broker: BrokerProcess) -> int:
    return next(n for n, b in cluster.items() if b is broker)


def test_a_restart_the_controller_never_saw_moves_leadership(own_cluster, zk_connect):
    """A broker epoch as KIP-380 has it: the registration's start timestamp changes while the node stays
    (a restart faster than the watch) -> the controller treats the broker as gone and back, so a log
    that may have lost its tail in a machine crash does not go on leading at the same epoch."""
    from kazoo.client import KazooClient

    cluster = own_cluster
    topic = new_topic(cluster)
    before = partition_state(cluster[1], topic)
    kazoo = KazooClient(zk_connect)
    kazoo.start(timeout=10)
    try:
        path = f"/brokers/ids/{before.leader_id}"
        registration = json.loads(kazoo.get(path)[0])
        kazoo.set(path, json.dumps({**registration, "timestamp": str(int(registration["timestamp"]) + 1)}).encode())
    finally:
        kazoo.stop()
        kazoo.close()
    moved = wait_for(lambda: (p := partition_state(cluster[1], topic)).leader_id not in (-1, before.leader_id) and p,
                     what="leadership moving off the restarted broker")
    assert moved.leader_epoch == before.leader_epoch + 1
    wait_for(lambda: in_sync(cluster[1], topic, 0), what="the restarted broker back in the ISR as a follower")


def produce_to_leader(cluster, topic: str, values_: list[bytes], index: int = 0, acks: int = -1,
                      via: BrokerProcess | None = None):
    leader = leader_of(cluster, topic, index, via)
    with WireClient(leader.port) as client:
        return produce(client, topic, index, batch(values_), acks=acks)


def test_every_broker_lists_the_cluster(cluster):
    topic = new_topic(cluster, partitions=3)
    views = [metadata_of(b, [topic]) for b in cluster.values()]
    assert {v.controller_id for v in views} <= set(NODES) and len({v.controller_id for v in views}) == 1
    leaders = [{p.partition_index: (p.leader_id, p.leader_epoch) for p in v.topics[0].partitions} for v in views]
    assert leaders[0] == leaders[1] == leaders[2]
    assert sorted(leader for leader, _ in leaders[0].values()) == [1, 2, 3]  # one partition led by each


def test_followers_hold_the_leaders_batches(cluster):
    topic = new_topic(cluster)
    for i in range(5):
        reply = produce_to_leader(cluster, topic, [b"r%d-%d" % (i, j) for j in range(10)])
        assert (reply.error_code, reply.base_offset) == (E.NONE, i * 10)
    leader = leader_of(cluster, topic)
    wait_for(lambda: all(segment_batches(b, topic) == segment_batches(leader, topic) for b in cluster.values()),
             what="every replica holding the same batches")
    assert len(segment_batches(leader, topic)) == 5
    with WireClient(leader.port) as client:
        assert list_offsets(client, topic, 0, -1).offset == 50  # the high watermark: all replicas have it


def test_followers_refuse_clients(cluster):
    topic = new_topic(cluster)
    leader = leader_of(cluster, topic)
    follower = next(b for n, b in cluster.items() if b is not leader)
    with WireClient(follower.port) as client:
        assert produce(client, topic, 0, batch([b"x"])).error_code == E.NOT_LEADER_OR_FOLLOWER
        answer = client.request(fetch_request(topic, 0, 0), 10).responses[0].partitions[0]
        assert answer.error_code == E.NOT_LEADER_OR_FOLLOWER  # a consumer before v11: the leader only
        assert list_offsets(client, topic, 0, -1).error_code == E.NOT_LEADER_OR_FOLLOWER


def test_a_follower_serves_consumers_from_fetch_v11_up_to_its_high_watermark(cluster):
    """KIP-392, as Kafka 4 serves it (tests/cluster/test_against_kafka_cluster.py found the difference)."""
    topic = new_topic(cluster)
    assert produce_to_leader(cluster, topic, [b"f%d" % i for i in range(6)]).error_code == E.NONE
    follower = next(b for b in cluster.values() if b is not leader_of(cluster, topic))

    def served():
        with WireClient(follower.port) as client:
            answer = client.request(fetch_request(topic, 0, 0), 12).responses[0].partitions[0]
        return answer.error_code == E.NONE and answer.high_watermark == 6 and answer
    answer = wait_for(served, what="the follower serving the six records")
    assert values(answer) == [b"f%d" % i for i in range(6)]


def test_a_follower_answers_list_offsets_for_the_debugging_replica_id(cluster):
    """Kafka answers ReplicaId -2 from any replica (fetchOnlyFromLeader is false only for it), from
    the replica's own log: its end offset, not the high watermark."""
    topic = new_topic(cluster)
    assert produce_to_leader(cluster, topic, [b"v%d" % i for i in range(6)]).error_code == E.NONE
    leader = leader_of(cluster, topic)
    with WireClient(leader.port) as client:
        assert delete_records(client, topic, 0, 2, timeout_ms=30_000).error_code == E.NONE
    follower = next(b for b in cluster.values() if b is not leader)
    epoch = partition_state(follower, topic).leader_epoch
    with WireClient(follower.port) as client:
        latest = list_offsets(client, topic, 0, -1, replica_id=-2)
        assert (latest.error_code, latest.offset, latest.leader_epoch) == (E.NONE, 6, epoch)
        earliest = list_offsets(client, topic, 0, -2, replica_id=-2)
        assert (earliest.error_code, earliest.offset) == (E.NONE, 2)
        assert list_offsets(client, topic, 0, -1, replica_id=-2, version=4,
                            current_leader_epoch=epoch + 1).error_code == E.UNKNOWN_LEADER_EPOCH
        # A broker's id or a consumer's still needs the leader.
        assert list_offsets(client, topic, 0, -1, replica_id=1).error_code == E.NOT_LEADER_OR_FOLLOWER
        assert list_offsets(client, topic, 0, -1).error_code == E.NOT_LEADER_OR_FOLLOWER


def test_delete_records_waits_for_every_replica_and_followers_learn_the_start(cluster):
    topic = new_topic(cluster)
    assert produce_to_leader(cluster, topic, [b"v%d" % i for i in range(20)]).error_code == E.NONE
    leader = leader_of(cluster, topic)
    with WireClient(leader.port) as client:
        reply = delete_records(client, topic, 0, 12, timeout_ms=30_000)
    assert (reply.error_code, reply.low_watermark) == (E.NONE, 12)
    # The low watermark is the smallest start offset the replicas reported, each durable before it
    # was reported: every checkpoint on disk says 12 now.
    assert [start_offset_checkpoint(b, topic) for b in cluster.values()] == [12, 12, 12]


def test_delete_records_leader_only_does_not_wait(cluster):
    topic = new_topic(cluster)
    assert produce_to_leader(cluster, topic, [b"v%d" % i for i in range(10)]).error_code == E.NONE
    leader = leader_of(cluster, topic)
    with WireClient(leader.port) as client:
        reply = delete_records(client, topic, 0, 4, version=3, leader_only=True)
    assert (reply.error_code, reply.leader_log_start_offset) == (E.NONE, 4)
    assert start_offset_checkpoint(leader, topic) == 4
    wait_for(lambda: all(start_offset_checkpoint(b, topic) == 4 for b in cluster.values()),
             what="followers learning the start from the leader's Fetch answers")


def test_a_killed_leader_is_replaced_without_losing_acknowledged_records(cluster):
    topic = new_topic(cluster)
    acknowledged = [b"a%d" % i for i in range(30)]
    assert produce_to_leader(cluster, topic, acknowledged).error_code == E.NONE
    old = partition_state(cluster[1], topic)
    cluster[old.leader_id].stop(signal.SIGKILL)
    survivors = [b for n, b in cluster.items() if n != old.leader_id]

    def new_leader():
        p = partition_state(survivors[0], topic)
        return p if p.leader_id not in (-1, old.leader_id) else None

    moved = wait_for(new_leader, what="a new leader")
    assert moved.leader_epoch == old.leader_epoch + 1
    assert old.leader_id not in moved.isr_nodes
    assert produce_to_leader(cluster, topic, [b"after"], via=survivors[0]).error_code == E.NONE
    with WireClient(cluster[moved.leader_id].port) as client:
        assert values(fetch(client, topic, 0, 0)) == acknowledged + [b"after"]

    cluster[old.leader_id].start()  # comes back as a follower, catches up, rejoins the ISR
    wait_for(lambda: in_sync(cluster[moved.leader_id], topic, 0), what="the old leader back in the ISR")
    wait_for(lambda: segment_batches(cluster[old.leader_id], topic) == segment_batches(cluster[moved.leader_id], topic),
             what="the old leader holding the new leader's batches")


def test_a_killed_controller_is_replaced(cluster):
    topic = new_topic(cluster)
    controller = metadata_of(cluster[1]).controller_id
    cluster[controller].stop(signal.SIGKILL)
    others = [b for n, b in cluster.items() if n != controller]
    wait_for(lambda: metadata_of(others[0]).controller_id not in (-1, controller), what="a new controller")
    # The new controller moves leadership away from the dead broker.
    wait_for(lambda: partition_state(others[0], topic).leader_id not in (-1, controller), what="a live leader")


def test_librdkafka_through_the_cluster(cluster):
    import confluent_kafka
    topic = new_topic(cluster, partitions=3)
    bootstrap = ",".join(b.bootstrap for b in cluster.values())
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(300):
        producer.produce(topic, value=b"m%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[bytes] = []

    def read() -> bool:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
        return len(seen) >= 300

    wait_for(read, timeout_s=60, interval_s=0, what="reading every record")
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(seen) == sorted(b"m%d" % i for i in range(300))


def test_committed_offsets_survive_a_coordinator_failover(cluster):
    """The coordinator is the leader of the group's __consumer_offsets partition; when it dies the
    new leader replays that partition and answers with every acknowledged commit."""
    topic = new_topic(cluster)

    def accepted_by_the_coordinator():
        # Leadership of the group's partition may still be moving back after the kills above (the
        # controller's preferred-leader rebalance): ask again until its coordinator takes the commit.
        with WireClient(cluster[1].port) as client:
            found = find_coordinator(client, "failover-group")
        if found.error_code != E.NONE:
            return None
        with WireClient(cluster[found.node_id].port) as client:
            answer = commit(client, "failover-group", {(topic, 0): 7})
        if answer == {(topic, 0): E.NONE}:
            return found
        assert answer[(topic, 0)] in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS), answer
        return None

    coordinator = wait_for(accepted_by_the_coordinator, what="the group's coordinator taking a commit")
    assert coordinator.node_id in NODES
    elsewhere = next(b for n, b in cluster.items() if n != coordinator.node_id)
    with WireClient(elsewhere.port) as client:
        assert commit(client, "failover-group", {(topic, 0): 7}) == {(topic, 0): E.NOT_COORDINATOR}

    cluster[coordinator.node_id].stop(signal.SIGKILL)

    def new_coordinator():
        with WireClient(elsewhere.port) as client:
            found = find_coordinator(client, "failover-group")
        return found if found.error_code == E.NONE and found.node_id != coordinator.node_id else None

    successor = wait_for(new_coordinator, what="a new coordinator")

    def committed():
        with WireClient(cluster[successor.node_id].port) as client:
            error, offsets = fetch_offsets(client, "failover-group", {topic: [0]})
        return offsets[(topic, 0)] if error == E.NONE and offsets[(topic, 0)][3] == E.NONE else None

    assert wait_for(committed, what="the commit on the new coordinator")[0] == 7


def test_a_restarted_broker_counts_as_alive_only_once_its_logs_are_loaded(cluster, module_zk_connect):
    """Broker 3 is killed and restarted with its log load held (tests/support/held_load.py). Until the load
    goes on it is not registered, the controller leaves its partition (replicas [3]) without a leader and
    places new replicas on the other two; once loaded it registers, leads again and serves what it had."""
    from kazoo.client import KazooClient

    topic = "only-on-3"
    create_assigned(cluster[1].port, topic, [3], {})
    with WireClient(cluster[3].port) as client:  # NOT_LEADER_OR_FOLLOWER until its watch gives it the role
        wait_for(lambda: produce(client, topic, 0, batch([b"kept"])).error_code == E.NONE, what="broker 3 leading")
    cluster[3].stop(signal.SIGKILL)
    kazoo = KazooClient(module_zk_connect)
    kazoo.start(timeout=10)

    def stored_leader() -> int:
        return json.loads(kazoo.get(f"/brokers/topics/{topic}/partitions/0/state")[0])["leader"]
    try:
        with HeldLoad(cluster[3].data_dir / "logs") as load:
            try:
                cluster[3].launch()
                wait_for(load.held, what="broker 3 loading its logs")
                assert "3" not in kazoo.get_children("/brokers/ids")  # its crashed run's registration ended too
                wait_for(lambda: [b.node_id for b in metadata_of(cluster[1]).brokers] == [1, 2],
                         what="the other brokers counting broker 3 gone")
                # the controller's own record of the partition (Metadata names no leader that is not registered)
                wait_for(lambda: stored_leader() == -1, what="the controller taking broker 3's leadership away")
                spread = CreateTopicsRequest.CreatableTopic(name="placed-while-3-loads", num_partitions=6,
                                                            replication_factor=2)
                with WireClient(cluster[1].port) as client:
                    [created] = client.request(CreateTopicsRequest(topics=[spread], timeout_ms=10_000), 7).topics
                assert created.error_code == E.NONE, created.error_message
                placed = json.loads(kazoo.get("/brokers/topics/placed-while-3-loads")[0])["partitions"]
                assert all(3 not in replicas for replicas in placed.values()), placed
                assert "3" not in kazoo.get_children("/brokers/ids")
                assert stored_leader() == -1  # not elected while loading
                load.release()
                cluster[3].wait_started()
            finally:
                load.end(cluster[3])
        wait_for(lambda: partition_state(cluster[1], topic).leader_id == 3, what="broker 3 leading again")
        with WireClient(cluster[3].port) as client:
            assert values(fetch(client, topic, 0, 0)) == [b"kept"]
    finally:
        kazoo.stop()
        kazoo.close()
