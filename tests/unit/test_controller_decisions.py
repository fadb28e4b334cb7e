"""What the controller writes for a partition given the alive brokers (broker/cluster/controller.py)."""

import pytest

from broker.cluster.controller import elect, prefer
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
    (state(2, [1, 2, 3]), {1, 2, 3}, state(1, [1, 2, 3], 5)),        # back to the preferred replica
    (state(2, [2, 3]), {1, 2, 3}, None),                             # the preferred one is not in sync yet
    (state(1, [1, 2]), {1, 2, 3}, None),                             # already preferred
    (state(-1, [1]), {2, 3}, None),                                  # offline: election, not rebalance
])
def test_prefer(before, alive, after):
    assert prefer(before, [1, 2, 3], alive) == after
