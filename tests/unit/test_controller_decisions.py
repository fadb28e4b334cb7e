"""What the controller writes for a partition given the alive brokers (broker/cluster/controller.py),
and the elections an operator asks for (broker/cluster/elections.py)."""

import pytest

from broker.cluster.controller import elect
from broker.cluster.elections import Outcome, preferred_election, unclean_election
from broker.cluster.partition_state import PartitionState


def state(leader, isr, epoch=4):
    return PartitionState(leader=leader, leader_epoch=epoch, isr=tuple(isr), controller_epoch=1)


@pytest.mark.parametrize(("before", "alive", "after"), [
    (state(1, [1, 2, 3]), {1, 2, 3}, None),                          # nothing to do
    (state(1, [1, 2, 3]), {1, 2}, state(1, [1, 2])),                 # a follower died: out of the ISR
    (state(1, [1, 2, 3]), {2, 3}, state(2, [2, 3], 5)),              # the leader died: first in-sync replica
    (state(1, [1, 3]), {2, 3}, state(3, [3], 5)),                    # never an out-of-sync replica (2)
    (state(1, [1]), {2, 3}, state(-1, [1], 5)),                      # none in sync alive: offline, 1 kept
    (state(-1, [1], 5), {2, 3}, None),                               # still waiting for 1
    (state(-1, [1], 5), {1, 2}, state(1, [1], 6)),                   # 1 is back: it leads
])
def test_elect(before, alive, after):
    assert elect(before, [1, 2, 3], alive) == after


@pytest.mark.parametrize(("before", "alive", "after"), [
    (state(1, [1]), {2, 3}, state(2, [2], 5)),                       # none in sync alive: the first alive replica
    (state(-1, [1], 5), {3}, state(3, [3], 6)),                      # offline, then an out-of-sync one comes back
    (state(1, [1, 3]), {2, 3}, state(3, [3], 5)),                    # an in-sync replica alive: still preferred
    (state(1, [1]), set(), state(-1, [1], 5)),                       # nobody alive: offline all the same
])
def test_elect_with_unclean_leader_election_enabled(before, alive, after):
    assert elect(before, [1, 2, 3], alive, unclean=True) == after


@pytest.mark.parametrize(("before", "alive", "outcome", "after"), [
    (state(2, [1, 2, 3]), {1, 2, 3}, Outcome.ELECTED, state(1, [1, 2, 3], 5)),
    (state(1, [1, 2, 3]), {1, 2, 3}, Outcome.NOT_NEEDED, None),
    (state(2, [2, 3]), {1, 2, 3}, Outcome.PREFERRED_UNAVAILABLE, None),  # the preferred one is out of sync
    (state(2, [1, 2, 3]), {2, 3}, Outcome.PREFERRED_UNAVAILABLE, None),  # the preferred one is down
    (state(1, [1]), {2, 3}, Outcome.PREFERRED_UNAVAILABLE, None),   # it leads in the state, but is dead
])
def test_preferred_election(before, alive, outcome, after):
    assert preferred_election(before, [1, 2, 3], alive) == (outcome, after)


@pytest.mark.parametrize(("before", "alive", "outcome", "after"), [
    (state(1, [1, 2]), {1, 2, 3}, Outcome.NOT_NEEDED, None),          # it has a leader
    (state(-1, [1], 5), {1, 2}, Outcome.ELECTED, state(1, [1], 6)),  # an in-sync replica first
    (state(-1, [1], 5), {2, 3}, Outcome.ELECTED, state(2, [2], 6)),  # else the first alive replica
    (state(-1, [1], 5), set(), Outcome.NONE_ELIGIBLE, None),
])
def test_unclean_election(before, alive, outcome, after):
    assert unclean_election(before, [1, 2, 3], alive) == (outcome, after)
