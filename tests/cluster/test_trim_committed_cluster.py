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


COORDINATOR_MOVING = {E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE}


def commit_at_coordinator(cluster, group: str, offsets: dict) -> None:
    """Commit as a client does: ask for the coordinator and retry while the one named has not taken
    the group's `__consumer_offsets` partition yet (broker 1's view may run ahead of that broker's)."""
    def attempt():
        with WireClient(cluster[coordinator_of(cluster, group)].port) as client:
            errors = commit(client, group, offsets)
        assert not set(errors.values()) - COORDINATOR_MOVING - {E.NONE}, errors
        return all(e == E.NONE for e in errors.values())
    wait_for(attempt, what=f"a commit of {group} at its coordinator")


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
            commit_at_coordinator(cluster, remote, {(topic, 0): offset})

        commit_remote(5)
        wait_for(lambda: start_of(leader, topic) == 5, what="the remote group's commit trimming")
        commit_at_coordinator(cluster, local, {(topic, 0): 12})  # ahead: the remote group holds the start
        commit_remote(7)  # had the leader trimmed to 12 on the local commit, the start could not come back to 7
        wait_for(lambda: start_of(leader, topic) == 7, what="the start following the remote group")
        commit_remote(15)
        wait_for(lambda: start_of(leader, topic) == 12, what="the start at the slower, local group")
