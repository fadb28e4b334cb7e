"""Kafka Streams (kafka-streams 4.3.1) with processing.guarantee=exactly_once_v2 on one Ebb broker:
the word count of tests/interop/test_streams.py (a repartition topic purged with DeleteRecords, a
changelog, counts read back by a read_committed consumer), every step a transaction — produce to
the repartition, changelog and output topics, TxnOffsetCommit of the consumed offsets, commit.
One JVM runs the `streams_eos` suite of ebb.interop.StreamsChecks."""

from __future__ import annotations

import pytest

from tests.interop.test_streams import ROUNDS, WORDS, assert_counts, ok

PREFIX = "eos"


@pytest.fixture(scope="module")
def steps(java, broker):
    return java.interop(broker.bootstrap, PREFIX, "streams_eos")


@pytest.mark.parametrize("wave", [1, 2])
def test_exact_counts_after_a_repartition(steps, wave):
    assert_counts(steps, wave)


def test_the_repartition_topic_is_purged_under_transactions(steps):
    first = ok(steps, "streams_wave1")["repartition"]
    second = ok(steps, "streams_wave2")["repartition"]
    # each transaction adds a marker per partition it wrote: more offsets than records
    assert sum(second["latest"]) > 2 * len(WORDS) * ROUNDS, second
    assert all(before < start <= end for before, start, end in zip(
        first["earliest"], second["earliest"], second["latest"], strict=True)), (first, second, steps.stderr[-6000:])


def test_streams_closes_cleanly(steps):
    line = ok(steps, "streams_closed")
    assert line["closed"] is True and line["final"] == "NOT_RUNNING", line
