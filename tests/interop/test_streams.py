"""Kafka Streams (kafka-streams 4.3.1, at-least-once) against Ebb: DeleteRecords used by a real application.

A topology reads words keyed by sentence, groups them by the word itself — which repartitions them
through the internal topic `streams-app-by-word-repartition` — counts them and writes the counts to
`streams-counts`. Streams commits every 200 ms and, every 500 ms (`repartition.purge.interval.ms`),
deletes what it has committed from the repartition topic with DeleteRecords. The input comes in two
waves; after each, the counts must be right and the repartition topic's earliest offsets must have
moved forward (above 0, then past wave 1's) in every partition the wave's records went to. One JVM
runs the `streams` suite of ebb.interop.StreamsChecks; what Streams logs at WARN and above is shown
when a test fails.
"""

from __future__ import annotations

import pytest

PREFIX = "streams"
APP = f"{PREFIX}-app"
WORDS = ["alpha", "beta", "beta", "gamma", "gamma", "gamma", "delta", "epsilon", "zeta", "eta"]  # StreamsChecks
ROUNDS = 20  # sentences per wave


@pytest.fixture(scope="module")
def steps(java, broker):
    return java.interop(broker.bootstrap, PREFIX, "streams")


def ok(steps, name: str) -> dict:
    line = steps.get(name, {})
    assert "error" not in line and not line.get("errors"), (
        f"{name}: {line}\nStreams logged (WARN and above):\n{steps.stderr[-6000:]}")
    return steps.ok(name)


def assert_counts(steps, wave: int) -> None:
    """After `wave` waves, every word counted exactly as often as it was sent."""
    expected = {word: WORDS.count(word) * ROUNDS * wave for word in set(WORDS)}
    assert ok(steps, f"streams_wave{wave}")["counts"] == expected, steps.stderr[-6000:]


@pytest.mark.parametrize("wave", [1, 2])
def test_counts_after_a_repartition(steps, wave):
    assert_counts(steps, wave)


def test_streams_purges_its_repartition_topic_with_delete_records(steps):
    first = ok(steps, "streams_wave1")["repartition"]
    second = ok(steps, "streams_wave2")["repartition"]
    assert sum(first["latest"]) == len(WORDS) * ROUNDS and len(first["latest"]) == 2, first
    assert sum(second["latest"]) == 2 * len(WORDS) * ROUNDS, second
    assert all(end > 0 for end in first["latest"]), f"the words should reach both partitions: {first}"
    # Streams deletes up to its committed offsets: above 0 after wave 1, past wave 1's start after wave 2
    assert all(0 < start <= end for start, end in zip(first["earliest"], first["latest"], strict=True)), (
        first, steps.stderr[-6000:])
    assert all(before < start <= end for before, start, end in zip(
        first["earliest"], second["earliest"], second["latest"], strict=True)), (first, second, steps.stderr[-6000:])


def test_internal_topics(steps):
    assert ok(steps, "streams_topics")["internal"] == [f"{APP}-by-word-repartition", f"{APP}-word-counts-changelog"]


def test_streams_runs_and_closes_cleanly(steps):
    line = ok(steps, "streams_closed")
    # the listener may not yet have heard of NOT_RUNNING when close() returns, so the instance is asked
    assert "RUNNING" in line["states"] and line["closed"] and line["final"] == "NOT_RUNNING", line
