"""ElectLeaders (KIP-460) on three broker processes and a real ZooKeeper, one cluster for the module
(auto leader rebalance off, so that only the elections asked for move leadership back).

- A preferred election after the preferred replica's broker returns moves leadership back to it;
  while that broker is down the answer is PREFERRED_LEADER_NOT_AVAILABLE, once it leads
  ELECTION_NOT_NEEDED. The request goes to a broker that is not the controller, which forwards it.
  The controller's PreferredReplicaImbalanceCount counts the partition while it is led elsewhere.
- An unclean election on a partition whose in-sync replicas are all down makes an out-of-sync replica
  the leader, and the records only the old leader had (acknowledged with acks=-1) are lost: Kafka's
  documented price of unclean.leader.election. With the topic's unclean.leader.election.enable the
  controller does the same by itself.
- A share group outlives its group coordinator (KIP-932's records in `__consumer_offsets`): killed, its
  successor loads the group as it was described and the members heartbeat on at their epochs.
- A share consumer continues across a leader move (its broker killed, KIP-932): the share-partition's state is its share
  coordinator's (`__share_group_state`), so the new leader redelivers what was released or still
  acquired at the move, and delivers what was produced meanwhile, skipping nothing, and again after a
  reassignment moves the partition off its leader; and a group
  coordinator that does not lead the partition sets, describes and deletes its start offset (last: it
  leaves leadership off the preferred replica).
"""

from __future__ import annotations

import signal

import pytest

from protocol.enums import ElectionType
from protocol.messages import AlterShareGroupOffsetsRequest as Alter
from protocol.messages import DeleteShareGroupOffsetsRequest as Delete
from protocol.messages import DescribeShareGroupOffsetsRequest as Describe
from protocol.messages import ElectLeadersRequest, ShareGroupDescribeRequest, ShareGroupHeartbeatRequest
from tests.broker.data_wire import WireClient, batch, fetch, produce, values
from tests.broker.group_wire import find_coordinator
from tests.broker.test_share_fetch_wire import ACCEPT, RELEASE, ack, initialize, part, ranges
from tests.broker.test_share_fetch_wire import fetch as share_fetch
from tests.cluster.reassignments import moved, reassign
from tests.cluster.three_brokers import NODES, E, in_sync, metadata_of, new_topic, partition_state, three_brokers
from tests.support.broker_process import free_port
from tests.support.metrics_scrape import scrape, value
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(240)


METRICS = {n: free_port() for n in NODES}
IMBALANCE = "kafka_controller_kafkacontroller_preferredreplicaimbalancecount"


@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory):
    connect = f"{zk_server.connect}/elections"
    # share targets at once (no share.assignment.interval.ms): the share group test's b joins at the next epoch
    extra = {"auto.leader.rebalance.enable": "false", "group.share.assignment.interval.ms": "0"}
    with three_brokers(connect, tmp_path_factory.mktemp("elections"), extra=extra,
                       per_node={n: {"ebb.metrics.listener": f"http://127.0.0.1:{port}"}
                                 for n, port in METRICS.items()}) as brokers:
        yield brokers


def imbalance(cluster) -> int:
    """The controller's PreferredReplicaImbalanceCount (the others report 0, as in Kafka)."""
    return sum(value(scrape(f"http://127.0.0.1:{METRICS[n]}/metrics"), IMBALANCE)
               for n, b in cluster.items() if b.process.poll() is None)


def elect(broker, election: ElectionType, topic: str, partition: int = 0):
    """One partition's election code; NOT_CONTROLLER (a broker just elected controller that has not
    taken over yet) is retried, as the admin client does."""
    request = ElectLeadersRequest(election_type=election, timeout_ms=10_000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[partition])])
    answers = []

    def answered() -> bool:
        with WireClient(broker.port) as client:
            answers.append(client.send(request, 2))
        return answers[-1].error_code != E.NOT_CONTROLLER
    wait_for(answered, what="an answer from the controller")
    answer = answers[-1]
    assert answer.error_code == E.NONE
    [result] = answer.replica_election_results
    [partition_result] = result.partition_result
    return partition_result.error_code


def not_the_controller(cluster):
    controller = metadata_of(cluster[1]).controller_id
    return cluster[next(n for n in NODES if n != controller)]


def leads(cluster, topic: str, node: int) -> bool:
    return all(partition_state(b, topic).leader_id == node for b in cluster.values() if b.process.poll() is None)


def test_preferred_election_after_a_brokers_return_moves_leadership_back(cluster):
    topic = new_topic(cluster, prefix="preferred")
    state = partition_state(cluster[1], topic)
    preferred = state.replica_nodes[0]
    assert state.leader_id == preferred
    wait_for(lambda: imbalance(cluster) == 0, what="every partition led by its preferred replica")
    cluster[preferred].stop()
    wait_for(lambda: partition_state(cluster[next(n for n in NODES if n != preferred)], topic).leader_id
             not in (preferred, -1), what="leadership moved off the stopped broker")
    asked = cluster[next(n for n in NODES if n != preferred)]
    assert elect(asked, ElectionType.PREFERRED, topic) == E.PREFERRED_LEADER_NOT_AVAILABLE
    wait_for(lambda: imbalance(cluster) >= 1, what="the partition counted as led elsewhere")

    cluster[preferred].start()
    wait_for(lambda: in_sync(cluster[preferred], topic, 0), what="the preferred replica back in the ISR")
    assert not leads(cluster, topic, preferred)  # nothing moves it back by itself (no auto rebalance)
    interim = partition_state(asked, topic).leader_id
    with WireClient(cluster[interim].port) as consumer:  # a v10 consumer's resolve, kept on its connection
        for _ in range(2):
            assert fetch(consumer, topic, 0, 0, version=10).error_code == E.NONE
        assert elect(not_the_controller(cluster), ElectionType.PREFERRED, topic) == E.NONE
        wait_for(lambda: leads(cluster, topic, preferred), what="every broker naming the preferred replica leader")
        assert fetch(consumer, topic, 0, 0, version=10).error_code == E.NOT_LEADER_OR_FOLLOWER
    wait_for(lambda: imbalance(cluster) == 0, what="no partition led elsewhere")
    assert elect(not_the_controller(cluster), ElectionType.PREFERRED, topic) == E.ELECTION_NOT_NEEDED
    assert elect(not_the_controller(cluster), ElectionType.UNCLEAN, topic) == E.ELECTION_NOT_NEEDED


def only_an_out_of_sync_replica_left(cluster, topic: str) -> tuple[int, int, int]:
    """Writes "kept" to every replica, then "lost" (acknowledged, acks=-1) while one replica is stopped;
    then the two in-sync brokers stop and the stopped one starts alone: (old leader, it, the third)."""
    state = partition_state(cluster[1], topic)
    leader, behind = state.leader_id, next(n for n in state.replica_nodes if n != state.leader_id)
    third = next(n for n in NODES if n not in (leader, behind))
    with WireClient(cluster[leader].port) as client:
        assert produce(client, topic, 0, batch([b"kept"]), acks=-1).error_code == E.NONE
    wait_for(lambda: sorted(partition_state(cluster[leader], topic).isr_nodes) == list(NODES),
             what="the first record on every replica")
    cluster[behind].stop()
    wait_for(lambda: behind not in partition_state(cluster[leader], topic).isr_nodes, what=f"{behind} out of the ISR")
    with WireClient(cluster[leader].port) as client:
        assert produce(client, topic, 0, batch([b"lost"]), acks=-1).error_code == E.NONE
    cluster[third].stop()
    cluster[leader].stop()
    cluster[behind].start()
    return leader, behind, third


def test_unclean_election_when_every_in_sync_replica_is_down_loses_what_only_they_had(cluster):
    topic = new_topic(cluster, prefix="unclean")
    leader, behind, third = only_an_out_of_sync_replica_left(cluster, topic)
    wait_for(lambda: partition_state(cluster[behind], topic).error_code == E.LEADER_NOT_AVAILABLE,
             what="the partition offline: its in-sync replicas are down")
    assert elect(cluster[behind], ElectionType.PREFERRED, topic) == E.PREFERRED_LEADER_NOT_AVAILABLE
    assert elect(cluster[behind], ElectionType.UNCLEAN, topic) == E.NONE
    wait_for(lambda: partition_state(cluster[behind], topic).leader_id == behind, what="the unclean leader serving")
    with WireClient(cluster[behind].port) as client:
        assert values(fetch(client, topic, 0, 0)) == [b"kept"]  # the acknowledged "lost" is gone: the price
    cluster[leader].start()
    cluster[third].start()
    wait_for(lambda: all(in_sync(b, topic, 0) for b in cluster.values()),
             what="the old leader truncated to the unclean leader's log and back in sync")
    with WireClient(cluster[leader].port) as client:  # a consumer's Fetch v12 is served by a follower
        assert values(fetch(client, topic, 0, 0)) == [b"kept"]


def test_unclean_leader_election_enable_lets_the_controller_elect_an_out_of_sync_replica(cluster):
    topic = new_topic(cluster, prefix="unclean-config", configs={"unclean.leader.election.enable": "true"})
    leader, behind, third = only_an_out_of_sync_replica_left(cluster, topic)  # the setting lets it lead
    wait_for(lambda: partition_state(cluster[behind], topic).leader_id == behind, what="the out-of-sync leader")
    with WireClient(cluster[behind].port) as client:
        assert values(fetch(client, topic, 0, 0)) == [b"kept"]  # the acknowledged "lost" is gone
    cluster[leader].start()
    cluster[third].start()
    wait_for(lambda: all(in_sync(b, topic, 0) for b in cluster.values()), what="everyone back in sync")


def test_a_share_consumer_continues_across_a_leader_move(cluster):
    topic = new_topic(cluster, prefix="share")
    first = partition_state(cluster[1], topic).leader_id
    [meta] = metadata_of(cluster[first], [topic]).topics
    group = "share-move"
    state_initialized(cluster, group, topic)
    with WireClient(cluster[first].port) as client:
        # share.auto.offset.reset=latest (the default): the share-partition starts at 0, the log's end now
        assert ranges(part(share_fetch(client, group, "m", 0, meta.topic_id))) == []
        for i in range(0, 6, 2):
            assert produce(client, topic, 0, batch([b"v%d" % i, b"v%d" % (i + 1)]), acks=-1).error_code == E.NONE
        assert ranges(part(share_fetch(client, group, "m", 1, meta.topic_id))) == [(0, 5, 1)]
        # 0-1 accepted, 2-3 released, 4-5 still acquired when the leader goes
        answer = ack(client, group, "m", 2, meta.topic_id, [(0, 1, ACCEPT), (2, 3, RELEASE)])
        assert answer.responses[0].partitions[0].error_code == E.NONE  # stored with the share coordinator
        for i in range(6, 10, 2):  # produced, never delivered before the move
            assert produce(client, topic, 0, batch([b"v%d" % i, b"v%d" % (i + 1)]), acks=-1).error_code == E.NONE
    cluster[first].stop(signal.SIGKILL)  # the share coordinator may die with it: its state is replicated
    survivor = cluster[next(n for n in NODES if n != first)]
    wait_for(lambda: partition_state(survivor, topic).leader_id not in (first, -1), what="a new leader")
    second = partition_state(survivor, topic).leader_id
    # nothing skipped: 2-5 again (a second delivery), 6-9 for the first time; 0-1 stay done
    with WireClient(cluster[second].port) as client:
        counts, got, epoch = deliveries(client, group, "n", meta.topic_id, 9)
        assert counts == {2: 2, 3: 2, 4: 2, 5: 2, 6: 1, 7: 1, 8: 1, 9: 1}
        assert got == [b"v%d" % i for i in range(2, 10)]
        cluster[first].start()
        wait_for(lambda: in_sync(cluster[first], topic, 0), what="the old leader back in the ISR")
        offsets_admin_on_another_broker(cluster, topic, second, meta.topic_id)
        # a reassignment moving the partition off its leader: 2-5 accepted there, 6-9 held by "n" come back
        answer = ack(client, group, "n", epoch, meta.topic_id, [(2, 5, ACCEPT)])
        assert answer.responses[0].partitions[0].error_code == E.NONE
    others = [n for n in NODES if n != second]
    assert reassign(cluster, topic, others) == E.NONE
    wait_for(lambda: moved(cluster, topic, others), what="the partition moved off its leader")
    with WireClient(cluster[partition_state(cluster[others[0]], topic).leader_id].port) as client:
        counts, got, _ = deliveries(client, group, "r", meta.topic_id, 9)
    assert counts == {6: 2, 7: 2, 8: 2, 9: 2} and got == [b"v%d" % i for i in range(6, 10)]


def state_initialized(cluster, group: str, topic: str) -> None:
    """The group's coordinator, wherever it is, has initialized the topic's share-partition state (a
    leader makes none it is not given)."""
    def coordinator() -> int | None:
        with WireClient(cluster[NODES[0]].port) as client:
            found = find_coordinator(client, group, version=4)
        return found.node_id if found.error_code == E.NONE and found.node_id in NODES else None
    node = wait_for(coordinator, what=f"{group}'s coordinator")
    with WireClient(cluster[node].port) as client:
        initialize(client, group, topic)


def deliveries(client, group: str, member: str, topic_id, last: int) -> tuple[dict[int, int], list[bytes], int]:
    """{offset: delivery count} and the values a new share session on `client`'s connection (the session
    ends with it) acquires, fetching until it holds offset `last` (a new leader may answer NOT_LEADER
    until it has heard it leads, and its high watermark may reach the log's end a fetch later); and the
    session's next epoch."""
    counts: dict[int, int] = {}
    got: list[bytes] = []
    epoch = [0]

    def delivered() -> bool:
        answer = share_fetch(client, group, member, epoch[0], topic_id)
        if answer.error_code == E.NONE:
            epoch[0] += 1
        p = part(answer)
        if p is not None and p.error_code == E.NONE:
            counts.update((o, c) for first, end, c in ranges(p) for o in range(first, end + 1))
            got.extend(values(p))
        return last in counts
    wait_for(delivered, what=f"delivered up to {last}")
    return counts, got, epoch[0]


def offsets_admin_on_another_broker(cluster, topic: str, leader_id: int, topic_id) -> None:
    """Alter, Describe and DeleteShareGroupOffsets on a group coordinator that does not lead the partition."""
    def coordinator_of(group: str) -> int:
        with WireClient(cluster[leader_id].port) as client:
            found = find_coordinator(client, group, version=4)
        return found.node_id if found.error_code == E.NONE else -1
    group = next(g for g in (f"share-admin-{i}" for i in range(64)) if coordinator_of(g) not in (leader_id, -1))
    asked = Alter.AlterShareGroupOffsetsRequestTopic
    with WireClient(cluster[coordinator_of(group)].port) as client:
        def described():
            [g] = client.send(Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(
                group_id=group, topics=None)]), 1).groups
            return [(t.topic_name, p.start_offset, p.error_code) for t in g.topics for p in t.partitions]
        altered = client.send(Alter(group_id=group, topics=[asked(topic_name=topic, partitions=[
            asked.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=7)])]), 0)
        assert altered.responses[0].partitions[0].error_code == E.NONE
        assert described() == [(topic, 7, E.NONE)]
        with WireClient(cluster[leader_id].port) as other:  # the leader starts where the coordinator set it
            assert ranges(part(share_fetch(other, group, "a", 0, topic_id))) == [(7, 9, 1)]
        deleted = client.send(Delete(group_id=group, topics=[Delete.DeleteShareGroupOffsetsRequestTopic(
            topic_name=topic)]), 0)
        assert deleted.responses[0].error_code == E.NONE
        assert described() == []


def test_a_share_group_outlives_its_coordinator(cluster):
    """Last in the module: the group's coordinator is killed (and started again at the end)."""
    topic = new_topic(cluster, prefix="share-meta")
    group = "share-failover"

    def coordinator() -> int:
        for broker in cluster.values():
            if broker.process is not None and broker.process.poll() is None:
                with WireClient(broker.port) as client:
                    found = find_coordinator(client, group, version=4)
                return found.node_id if found.error_code == E.NONE else -1
        return -1

    def beat(node: int, member: str, epoch: int, topics=None):
        with WireClient(cluster[node].port) as client:
            return client.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                          subscribed_topic_names=topics), 1)

    def described(node: int):
        with WireClient(cluster[node].port) as client:
            [g] = client.send(ShareGroupDescribeRequest(group_ids=[group]), 1).groups
        return g

    first = wait_for(lambda: (c := coordinator()) in NODES and c, what="the group's coordinator")
    assert wait_for(lambda: beat(first, "a", 0, [topic]).error_code == E.NONE or None, what="a joined")
    # the join is answered before the initialization it asked for ends: a takes the partition at a later beat
    assert wait_for(lambda: beat(first, "a", 1).member_epoch == 2 or None, what="a given the partition")
    assert beat(first, "b", 0, [topic]).member_epoch == 3
    assert beat(first, "a", 2).member_epoch == 3
    before = described(first)
    assert (before.error_code, before.group_epoch, len(before.members)) == (E.NONE, 3, 2)
    cluster[first].stop(signal.SIGKILL)
    second = wait_for(lambda: (c := coordinator()) not in (first, -1) and c, what="a new coordinator")
    moving = (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE)
    after = wait_for(lambda: (g := described(second)).error_code not in moving and g, what="the group loaded")
    assert after == before
    for member in ("a", "b"):  # no rejoin: the same epoch, nothing new to take
        answer = beat(second, member, 3)
        assert (answer.error_code, answer.member_epoch, answer.assignment) == (E.NONE, 3, None), answer
    cluster[first].start()
    wait_for(lambda: coordinator() in NODES and all(b.process.poll() is None for b in cluster.values()),
             what="the old coordinator back")
