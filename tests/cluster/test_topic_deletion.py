"""Topic deletion in a cluster, the KAFKA-330 way (broker/cluster/deletion.py): three broker processes on a
real ZooKeeper. A deletion with every broker up finishes before DeleteTopics answers; with a replica's
broker down it waits (REQUEST_TIMED_OUT, the mark stays, the name cannot be reused) and finishes when
that broker comes back — also after the controller that started it was killed. Logs of a deleted topic
are gone from every broker; the name can then be created again with a new topic id."""

from __future__ import annotations

import signal

import pytest
from kazoo.client import KazooClient

from protocol.messages import CreateTopicsRequest, DeleteTopicsRequest
from tests.broker.data_wire import WireClient, batch, produce
from tests.cluster.three_brokers import (
    E,
    in_sync,
    metadata_of,
    new_topic,
    partition_state,
    segment_batches,
)
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cluster(restored_three_brokers):
    """The module's cluster: each test deletes topics of its own; the brokers a test kills are started
    again, by the test or after it (`restore`)."""
    return restored_three_brokers


@pytest.fixture
def kazoo(module_zk_connect):
    client = KazooClient(module_zk_connect)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def delete(broker, name: str, timeout_ms: int = 20_000):
    with WireClient(broker.port) as client:
        [result] = client.send(DeleteTopicsRequest(topic_names=[name], timeout_ms=timeout_ms), 4).responses
    return result


def create(broker, name: str):
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=-1, configs=[])
    with WireClient(broker.port) as client:
        [created] = client.send(CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 7).topics
    return created


def live_dirs(broker, name: str) -> list[str]:
    """The topic's partition directories that are not renamed away for deletion."""
    return sorted(p.name for p in (broker.data_dir / "logs").glob(f"{name}-*") if not p.name.endswith("-delete"))


def listed(broker, name: str) -> bool:
    return any(t.name == name and t.error_code == E.NONE for t in metadata_of(broker).topics)


def test_deletion_with_every_broker_up(cluster, kazoo):
    name = new_topic(cluster, partitions=2, prefix="doomed")
    assert delete(cluster[2], name).error_code == E.NONE
    assert kazoo.exists(f"/brokers/topics/{name}") is None
    assert kazoo.exists(f"/config/topics/{name}") is None
    assert kazoo.exists(f"/admin/delete_topics/{name}") is None
    for broker in cluster.values():
        assert live_dirs(broker, name) == []
        assert not listed(broker, name)


def test_deletion_waits_for_a_broker_that_is_down(cluster, kazoo):
    name = new_topic(cluster, prefix="outage")
    leader = partition_state(cluster[1], name).leader_id
    with WireClient(cluster[leader].port) as client:
        assert produce(client, name, 0, batch([b"x"] * 5), acks=-1).error_code == E.NONE
    # acks=-1 waits for the in-sync replicas only: a broker slow to create its replica (a loaded
    # machine's fsync) drops out of the ISR and the produce succeeds without it. The test is about a
    # replica that is on disk, so wait until broker 3 holds the records before killing it.
    wait_for(lambda: segment_batches(cluster[3], name) != [], what="broker 3's replica holding the records")
    cluster[3].stop(signal.SIGKILL)
    up = [cluster[1], cluster[2]]

    result = delete(up[0], name, timeout_ms=1500)
    assert result.error_code == E.REQUEST_TIMED_OUT
    wait_for(lambda: sorted(kazoo.get_children(f"/admin/delete_topics/{name}")) == ["1", "2"],
             what="the two brokers that are up dropping their replicas")  # 3 cannot
    assert kazoo.exists(f"/brokers/topics/{name}") is not None
    for broker in up:
        assert live_dirs(broker, name) == [] and not listed(broker, name)
    assert live_dirs(cluster[3], name) == [f"{name}-0"]  # the stopped broker's replica is still on disk
    again = create(up[1], name)
    assert again.error_code == E.TOPIC_ALREADY_EXISTS and "marked for deletion" in again.error_message

    cluster[3].start()  # drops its replica, acknowledges; the controller finishes the deletion
    wait_for(lambda: kazoo.exists(f"/admin/delete_topics/{name}") is None, what="the deletion finishing")
    assert kazoo.exists(f"/brokers/topics/{name}") is None
    assert live_dirs(cluster[3], name) == []
    assert create(up[1], name).error_code == E.NONE  # the name is free again
    # The new topic of the old name is a topic like any other on every broker, the returning one too.
    def views():  # each broker's view of the new topic, so a failure says whose view lags and how
        return {n: _view(b, name) for n, b in cluster.items()}
    try:
        wait_for(lambda: all(in_sync(b, name, 0) for b in cluster.values()), what="the new topic in sync everywhere")
    except AssertionError as exc:
        returning_log = cluster[3].log_path.read_text()[-6000:]
        raise AssertionError(f"{exc}; views {views()}; broker 3's log:\n{returning_log}") from None

    def produce_to_the_leader():
        # The view taken a moment ago may be a step behind on a loaded machine: like a client, retry on
        # the errors that say "not here" or "not yet", which append nothing.
        leader = cluster[partition_state(up[0], name).leader_id]
        with WireClient(leader.port) as client:
            reply = produce(client, name, 0, batch([b"new"]), acks=-1)
        return None if reply.error_code in (E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS) else reply

    reply = wait_for(produce_to_the_leader, what="a produce the new topic's leader takes")
    assert (reply.error_code, reply.base_offset) == (E.NONE, 0)


def test_deletion_survives_a_controller_failover(cluster, kazoo):
    name = new_topic(cluster, prefix="failover")
    controller = metadata_of(cluster[1]).controller_id
    replica_down = next(n for n in cluster if n != controller)
    asker = next(n for n in cluster if n not in (controller, replica_down))
    cluster[replica_down].stop(signal.SIGKILL)
    assert delete(cluster[asker], name, timeout_ms=1000).error_code == E.REQUEST_TIMED_OUT

    cluster[controller].stop(signal.SIGKILL)  # the controller that saw the deletion start is gone
    wait_for(lambda: metadata_of(cluster[asker]).controller_id not in (-1, controller), what="a new controller")
    cluster[replica_down].start()
    wait_for(lambda: kazoo.exists(f"/admin/delete_topics/{name}") is None,
             what="the new controller finishing the deletion")
    assert live_dirs(cluster[replica_down], name) == []
    cluster[controller].start()
    assert live_dirs(cluster[controller], name) == []
    assert not listed(cluster[controller], name)


def _view(broker, name):
    try:
        p = partition_state(broker, name)
    except (StopIteration, ValueError) as exc:
        return repr(exc)
    return (p.error_code, p.leader_id, p.leader_epoch, sorted(p.replica_nodes), sorted(p.isr_nodes))
