"""Rack-aware placement: the rules Kafka's striping guarantees, whatever its random offsets (the exact
placements are compared with Kafka's code in tests/differential/test_placement_against_kafka.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from broker.topic_placement import assign_replicas, grown_partitions

RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


@pytest.mark.parametrize("replication_factor", [1, 2, 3])
def test_replicas_on_distinct_racks_and_spread_evenly(replication_factor: int) -> None:
    for _ in range(20):  # fresh random offsets each time
        placed = assign_replicas(12, replication_factor, None, RACKS, 1, 1)
        assert sorted(placed) == list(range(12))
        for replicas in placed.values():
            assert len(set(replicas)) == replication_factor
            assert len({RACKS[b] for b in replicas}) == replication_factor  # never two on one rack
        leaders = Counter(RACKS[r[0]] for r in placed.values())
        assert set(leaders.values()) == {4}  # 12 partitions, 3 racks: each rack leads four
        replicas_per_broker = Counter(b for r in placed.values() for b in r)
        assert set(replicas_per_broker.values()) == {2 * replication_factor}


def test_more_replicas_than_racks_uses_every_rack() -> None:
    brokers = {1: "a", 2: "a", 3: "a", 4: "b"}
    for _ in range(20):
        for replicas in assign_replicas(8, 3, None, brokers, 1, 1).values():
            assert {brokers[b] for b in replicas} == {"a", "b"}


def test_grown_partitions_spread_over_racks() -> None:
    new = grown_partitions("t", 2, 8, 2, None, RACKS)
    assert sorted(new) == list(range(2, 8))
    assert all(RACKS[r[0]] != RACKS[r[1]] for r in new.values())


def test_without_racks_round_robin_stays() -> None:
    assert assign_replicas(3, 2, None, {1: None, 2: None, 3: None}, 1, 1) == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
