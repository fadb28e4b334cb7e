"""`retention.committed.groups` in a cluster: the groups are spread over the coordinators, and the
partition leader must count the commits of groups another broker coordinates (broker/group/
cluster_commits.py) — otherwise it would trim what such a group has not read yet."""

from __future__ import annotations

import itertools

import pytest

from tests.broker.data_wire import WireClient, batch, list_offsets, produce
from tests.broker.group_wire import commit, find_coordinator
from tests.cluster.three_brokers import E, new_topic, partition_state, three_brokers
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(180)


def coordinator_of(cluster, group: str) -> int:
    with WireClient(cluster[1].port) as client:
        found = wait_for(lambda: (f := find_coordinator(client, group)).error_code == E.NONE and f,
                         what=f"a coordinator for {group}")
    return found.node_id


def start_of(broker, topic: str) -> int:
    with WireClient(broker.port) as client:
        return list_offsets(client, topic, 0, -2).offset


def test_the_leader_counts_groups_coordinated_elsewhere(zk_connect, tmp_path):
    with three_brokers(zk_connect, tmp_path, {"log.retention.check.interval.ms": "500"}) as cluster:
        topic = new_topic(cluster, prefix="trimmed", configs={"retention.committed.groups": "*"})
        leader = cluster[partition_state(cluster[1], topic).leader_id]
        with WireClient(leader.port) as client:
            assert produce(client, topic, 0, batch([b"v%d" % i for i in range(20)]), acks=-1).error_code == E.NONE
        leader_id = partition_state(cluster[1], topic).leader_id
        names = (f"group-{i}" for i in itertools.count())
        remote = next(g for g in names if coordinator_of(cluster, g) != leader_id)
        local = next(g for g in names if coordinator_of(cluster, g) == leader_id)

        def commit_remote(offset: int) -> None:
            with WireClient(cluster[coordinator_of(cluster, remote)].port) as client:
                assert commit(client, remote, {(topic, 0): offset}) == {(topic, 0): E.NONE}

        commit_remote(5)
        wait_for(lambda: start_of(leader, topic) == 5, what="the remote group's commit trimming")
        with WireClient(leader.port) as client:  # the local group is ahead: the remote one holds the start
            assert commit(client, local, {(topic, 0): 12}) == {(topic, 0): E.NONE}
        commit_remote(7)  # had the leader trimmed to 12 on the local commit, the start could not come back to 7
        wait_for(lambda: start_of(leader, topic) == 7, what="the start following the remote group")
        commit_remote(15)
        wait_for(lambda: start_of(leader, topic) == 12, what="the start at the slower, local group")
