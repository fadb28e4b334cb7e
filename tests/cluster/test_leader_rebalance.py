"""Automatic preferred leader rebalancing (auto.leader.rebalance.enable, broker/cluster/leader_balance.py)
on three broker processes and a real ZooKeeper, the check every second.

A broker killed with SIGKILL loses the leaderships it is the preferred replica of; restarted, it
rejoins the ISR, and with the setting on the controller gives them back within a bound (the first
check comes 5 s after a controller takes over, then one a second). With it off they stay where they
are until a preferred election (ElectLeaders) is asked for.
"""

from __future__ import annotations

import signal
import time

import pytest

from broker.cluster.leader_balance import FIRST_CHECK_DELAY_S
from protocol.enums import ElectionType
from tests.cluster.test_leader_election import elect
from tests.cluster.three_brokers import NODES, E, in_sync, new_topic, partition_state, three_brokers
from tests.support.polling import holds_for, wait_for

pytestmark = pytest.mark.timeout(180)

INTERVAL_S = 1
PARTITIONS = 3
# From the restarted broker's return to the ISR: at most one check delay after a controller takes
# over plus two intervals (one check may just have missed it), with room for a loaded machine.
RETURN_BOUND_S = FIRST_CHECK_DELAY_S + 2 * INTERVAL_S + 10


def settings(enable: bool) -> dict[str, str]:
    return {"auto.leader.rebalance.enable": str(enable).lower(),
            "leader.imbalance.check.interval.seconds": str(INTERVAL_S)}


def kill_a_preferred_leader_and_bring_it_back(cluster) -> tuple[str, int, list[int], object]:
    """The topic, the killed broker, the partitions it is the preferred replica of (led elsewhere now,
    it back in their ISRs) and a broker that stayed up."""
    topic = new_topic(cluster, partitions=PARTITIONS)
    states = [partition_state(cluster[1], topic, p) for p in range(PARTITIONS)]
    assert all(s.leader_id == s.replica_nodes[0] for s in states)  # a new topic starts balanced
    victim = states[0].leader_id
    preferred_here = [p for p, s in enumerate(states) if s.replica_nodes[0] == victim]
    survivor = cluster[next(n for n in NODES if n != victim)]
    cluster[victim].stop(signal.SIGKILL)
    wait_for(lambda: all(partition_state(survivor, topic, p).leader_id not in (-1, victim) for p in preferred_here),
             what="leadership moved off the killed broker")
    cluster[victim].start()
    wait_for(lambda: all(in_sync(cluster[victim], topic, p) for p in preferred_here), timeout_s=60,
             what="the restarted broker back in the ISRs")
    return topic, victim, preferred_here, survivor


def test_leadership_returns_to_the_preferred_replica_by_itself(zk_server, tmp_path):
    with three_brokers(f"{zk_server.connect}/rebalance-on", tmp_path, settings(True)) as cluster:
        topic, victim, preferred_here, survivor = kill_a_preferred_leader_and_bring_it_back(cluster)
        rejoined = time.monotonic()
        wait_for(lambda: all(partition_state(survivor, topic, p).leader_id == victim for p in preferred_here),
                 timeout_s=RETURN_BOUND_S, what="leadership back on the preferred replica")
        print(f"leadership returned {time.monotonic() - rejoined:.1f}s after the ISR rejoin")
        # Every broker names it, and an operator's election finds nothing left to do.
        wait_for(lambda: all(partition_state(b, topic, p).leader_id == victim
                             for b in cluster.values() for p in preferred_here), what="every broker agreeing")
        assert elect(survivor, ElectionType.PREFERRED, topic, preferred_here[0]) == E.ELECTION_NOT_NEEDED


def test_with_auto_leader_rebalance_off_leadership_stays(zk_server, tmp_path):
    with three_brokers(f"{zk_server.connect}/rebalance-off", tmp_path, settings(False)) as cluster:
        topic, victim, preferred_here, survivor = kill_a_preferred_leader_and_bring_it_back(cluster)
        holds_for(lambda: all(partition_state(survivor, topic, p).leader_id not in (-1, victim)
                              for p in preferred_here),
                  duration_s=RETURN_BOUND_S, what="leadership staying off the preferred replica")
        # It could have led all along (alive, in sync): the election an operator asks for moves it.
        assert elect(survivor, ElectionType.PREFERRED, topic, preferred_here[0]) == E.NONE
        wait_for(lambda: partition_state(survivor, topic, preferred_here[0]).leader_id == victim,
                 what="the asked-for election moving leadership back")
