"""Automatic preferred leader rebalancing, as Kafka's ZooKeeper-era controller did it
(KafkaController.checkAndTriggerAutoLeaderRebalance, up to Kafka 3.9).

Settings (broker properties, read-only as in Kafka: a restart changes them):
- `auto.leader.rebalance.enable` (true): the controller checks at all;
- `leader.imbalance.check.interval.seconds` (300, at least 1): the first check comes 5 s after a
  broker becomes controller (Kafka's fixed delay after a failover), the next ones every interval;
- `leader.imbalance.per.broker.percentage` (10, any integer: Kafka's ZooKeeper controller bounded it
  no further, and Kafka 4 dropped it with ZooKeeper).

Each check groups the partitions by preferred replica (the first of the assignment), leaving out the
topics marked for deletion. A broker's imbalance is the share of its partitions whose leader is
another broker (an offline partition, leader -1, counts; one without a state yet does not). Above the
percentage, the preferred election of ElectLeaders (broker/cluster/elections.py) is held for its
partitions led elsewhere, except those being reassigned (the reassignment decides their leader); the
election leaves alone a partition whose preferred replica is not alive or not in the ISR.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from broker.log import TopicPartition

FIRST_CHECK_DELAY_S = 5.0  # after becoming controller, as Kafka's onControllerFailover schedules it


@dataclass(frozen=True)
class Placement:
    """One partition as the imbalance check sees it."""

    tp: TopicPartition
    preferred: int  # the first replica of the assignment
    leader: int  # -1: offline
    moving: bool  # a reassignment of it is under way


def imbalanced(placements: Iterable[Placement], percentage: int) -> dict[int, list[TopicPartition]]:
    """Per preferred broker whose imbalance ratio is above `percentage` %, the partitions to hold the
    preferred election for (led elsewhere, not being reassigned); brokers with none are left out."""
    by_preferred: dict[int, list[Placement]] = defaultdict(list)
    for placement in placements:
        by_preferred[placement.preferred].append(placement)
    elections: dict[int, list[TopicPartition]] = {}
    for broker, partitions in sorted(by_preferred.items()):
        elsewhere = [p for p in partitions if p.leader != broker]
        if len(elsewhere) / len(partitions) <= percentage / 100:
            continue
        candidates = sorted(p.tp for p in elsewhere if not p.moving)
        if candidates:
            elections[broker] = candidates
    return elections
