"""Rack-aware placement (broker/striped_placement.py) against Kafka 4.3.1's StripedReplicaPlacer.

Kafka seeds its placer's java.util.Random from the clock, so placements differ run to run; here both
are driven by java.util.Random with the same seed (Kafka's code in a JVM, Ebb's through a copy of that
generator below), and every partition's replicas must come out the same. Rack names are one letter
(and "no rack"): Kafka draws random numbers for its racks in its hash map's order, Ebb in name order,
and for these the two orders are one.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from broker.striped_placement import place_striped
from tests.interop.conftest import TARGET, build

_JAVA = Path(__file__).parent / "java" / "StripedPlacement.java"
_MASK = (1 << 48) - 1


class JavaRandom:
    """java.util.Random: the 48-bit linear congruential generator, nextInt(bound) and Collections.shuffle."""

    def __init__(self, seed: int):
        self.seed = (seed ^ 0x5DEECE66D) & _MASK

    def _next(self, bits: int) -> int:
        self.seed = (self.seed * 0x5DEECE66D + 0xB) & _MASK
        value = self.seed >> (48 - bits)
        return value - (1 << bits) if value >= 1 << (bits - 1) and bits == 32 else value

    def next_int(self, bound: int) -> int:
        if bound & -bound == bound:
            return (bound * self._next(31)) >> 31
        while True:
            bits = self._next(31)
            value = bits % bound
            if bits - value + (bound - 1) < 1 << 31:  # Java's int overflow check
                return value

    def shuffle(self, items: list) -> None:
        for i in range(len(items), 1, -1):
            j = self.next_int(i)
            items[i - 1], items[j] = items[j], items[i - 1]


# (brokers id -> rack, partitions, replication factor)
SCENARIOS: list[tuple[dict[int, str | None], int, int]] = [
    ({1: "a", 2: "b", 3: "c"}, 3, 3),
    ({1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}, 20, 3),
    ({1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}, 12, 2),
    ({1: "a", 2: "a", 3: "b", 4: "c", 5: "c", 6: "c"}, 25, 2),
    ({1: "a", 2: "a", 3: "a", 4: "b"}, 12, 3),
    ({1: "a", 2: "b"}, 9, 2),
    ({1: None, 2: "a", 3: "b", 4: None}, 16, 3),
    ({5: "c", 3: "a", 9: "b", 1: "a", 2: "c"}, 30, 4),
    ({1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}, 11, 5),
    ({1: "a"}, 4, 1),
]
SEEDS = (1, 7, 42, 1234567, 2**40 + 3)


def test_java_random_matches_java() -> None:
    """The copy of the generator: new Random(42).nextInt(10) five times is 0, 3, 8, 4, 0 in Java."""
    rng = JavaRandom(42)
    assert [rng.next_int(10) for _ in range(5)] == [0, 3, 8, 4, 0]


def test_placement_matches_kafka() -> None:
    build()  # the jars tests/interop/java pins (Kafka 4.3.1)
    lines = []
    cases = []
    for brokers, partitions, replicas in SCENARIOS:
        for seed in SEEDS:
            specs = " ".join(f"{b}:{r or '-'}" for b, r in brokers.items())
            lines.append(f"{seed} {partitions} {replicas} {specs}")
            cases.append((brokers, partitions, replicas, seed))
    done = subprocess.run(["java", "-cp", f"{TARGET / 'lib'}/*", str(_JAVA)], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=120, check=True)
    answers = done.stdout.split("\n")
    assert len(answers) == len(cases) + 1
    for (brokers, partitions, replicas, seed), answer in zip(cases, answers, strict=False):
        kafka = [[int(b) for b in p.split(",")] for p in answer.split()]
        ours = place_striped(partitions, replicas, brokers, JavaRandom(seed))
        assert ours == kafka, (brokers, partitions, replicas, seed)
