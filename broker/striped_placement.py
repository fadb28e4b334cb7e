"""Rack-aware replica placement: the striping Kafka 4.3.1's controller uses (its StripedReplicaPlacer).

Kafka 4 places replicas only this way (KRaft); the ZooKeeper-era rack-alternating assignment of
AdminUtils is gone with ZooKeeper. The rules it keeps:

- brokers are grouped by rack (a broker without one is in the rack "none", sorted first); racks are
  taken in name order from a random offset, and each rack's brokers in id order from a random offset;
- a partition's first replica (its leader) comes from the rack at the current offset (the next rack
  that still has a broker this round); the other replicas go round the racks from that same offset,
  one broker per visit, skipping the leader's rack once: with at least as many racks as replicas, no
  two replicas of a partition share a rack;
- each partition moves the rack offset and every rack's broker offset on by one, so leaders rotate
  over racks and over brokers within a rack; after as many partitions as there are brokers, the rack
  order and each rack's brokers are shuffled, so later rounds do not repeat the first.

Randomness comes from a `PlacementRandom`: Python's generator in the broker; the tests drive it with
Java's generator and a seed to compare the placement with Kafka's own code. Kafka draws its random
numbers for the racks in its hash map's order; here they are drawn in rack name order, which is the
same order for the short rack names the comparison uses.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Protocol


class PlacementRandom(Protocol):
    def next_int(self, bound: int) -> int:
        """A uniform integer in [0, bound)."""

    def shuffle(self, items: list) -> None:
        """Shuffle in place."""


class SystemRandom:
    """The broker's source: Python's generator (Kafka seeds its own from the clock too)."""

    def __init__(self) -> None:
        self._random = random.Random()

    def next_int(self, bound: int) -> int:
        return self._random.randrange(bound)

    def shuffle(self, items: list) -> None:
        self._random.shuffle(items)


class _Brokers:
    """One rack's brokers, handed out in turn from an offset that moves by one per placement round."""

    def __init__(self, ids: list[int], rng: PlacementRandom):
        self.ids = sorted(ids)
        self.offset = rng.next_int(len(self.ids))
        self.index = 0
        self.epoch = 0

    def next(self, epoch: int) -> int:
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.ids)
        if self.index >= len(self.ids):
            return -1  # every broker of this rack already has a replica of this partition
        broker = self.ids[(self.index + self.offset) % len(self.ids)]
        self.index += 1
        return broker


def _rack_key(rack: str | None) -> tuple[bool, str]:
    return (rack is not None, rack or "")


def place_striped(count: int, replication_factor: int, brokers: Mapping[int, str | None],
                  rng: PlacementRandom) -> list[list[int]]:
    """The replicas of `count` new partitions over `brokers` (id -> rack); the caller has checked that
    there are at least `replication_factor` brokers and that it is positive."""
    by_rack: dict[str | None, list[int]] = {}
    for broker_id, rack in brokers.items():
        by_rack.setdefault(rack, []).append(broker_id)
    names = sorted(by_rack, key=_rack_key)
    racks = {name: _Brokers(by_rack[name], rng) for name in names}
    offset = rng.next_int(len(names))
    epoch = 0
    placed = []
    for _ in range(count):
        if epoch == len(brokers) and len(brokers) > 1:
            # as many partitions as brokers: a new order, so the next round is not the same again
            rng.shuffle(names)
            for name in sorted(racks, key=_rack_key):
                rng.shuffle(racks[name].ids)
            epoch = 0
        if offset == len(names):
            offset = 0
        first_rack = offset
        while True:  # the leader: the first rack from the offset with a broker left this round
            leader = racks[names[first_rack]].next(epoch)
            if leader >= 0:
                break
            first_rack = (first_rack + 1) % len(names)
        replicas = [leader]
        rack_index = offset
        while len(replicas) < replication_factor:
            broker = -1
            while broker < 0:
                if rack_index == first_rack:
                    first_rack = -1  # the leader's rack gave its broker already: pass it once
                else:
                    broker = racks[names[rack_index]].next(epoch)
                rack_index = (rack_index + 1) % len(names)
            replicas.append(broker)
        placed.append(replicas)
        epoch += 1
        offset += 1
    return placed
