"""Kafka Streams' heavier operators against Ebb, judged by their results and by Kafka 4.3.1.

One at-least-once app (ebb.interop.StreamsTopologyChecks) runs a tumbling-window sum per customer, a
stream-table join after a re-key summed per region, a foreign-key join of the orders table on its
product summed per category with a subtractor, and a windowed stream-stream join of clicks with orders,
over orders sent in phases: the tables first, then orders and clicks, then orders moved to another
product and orders deleted (tombstones). After each phase every output's latest value per key must be
what the Java side computes from the data it sent. The same app runs against a Kafka node from the
pinned jars: its internal topics (repartition topics, changelogs of key-value and windowed stores,
the foreign-key join's subscription topics) and the configs Streams gave them must be the same on both.
"""

from __future__ import annotations

import concurrent.futures

import pytest

from tests.interop.conftest import TARGET
from tests.support.kafka_node import KafkaNode

PREFIX = "topo"
PHASES = ["topology_orders", "topology_changes"]


@pytest.fixture(scope="module")
def runs(java, broker, tmp_path_factory):
    """The suite's steps against Ebb and against Kafka; Kafka's node starts, and the suite's run against
    it goes on, while Ebb's run goes on (each run waits mostly on Streams: commits, rebalances)."""
    kafka = KafkaNode(tmp_path_factory.mktemp("kafka"), f"{TARGET / 'lib'}/*")

    def on_kafka():
        kafka.start()
        return java.interop(kafka.bootstrap, PREFIX, "streams_topology")

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        theirs = pool.submit(on_kafka)
        try:
            ours = java.interop(broker.bootstrap, PREFIX, "streams_topology")
        finally:
            concurrent.futures.wait([theirs])
            kafka.stop()
    return ours, theirs.result()


def ok(steps, name: str) -> dict:
    line = steps.ok(name)
    assert not line.get("errors"), f"{name}: {line}\nStreams logged (WARN and above):\n{steps.stderr[-6000:]}"
    return line


@pytest.mark.parametrize("broker_name", ["ebb", "kafka"])
def test_the_tables_are_read_before_the_orders(runs, broker_name):
    steps = runs[0] if broker_name == "ebb" else runs[1]
    line = ok(steps, "topology_tables")
    assert line["committed"] and all(offset >= 0 for offset in line["committed"].values()), line


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("broker_name", ["ebb", "kafka"])
def test_every_output_holds_what_the_data_makes(runs, broker_name, phase):
    steps = runs[0] if broker_name == "ebb" else runs[1]
    line = ok(steps, phase)
    assert line["outputs"] == line["expected"], steps.stderr[-6000:]


def test_internal_topics_and_their_configs_are_kafkas(runs):
    ours, theirs = (ok(steps, "topology_topics")["internal"] for steps in runs)
    assert ours == theirs
    kinds = {name.rsplit("-", 1)[-1] for name in ours}
    assert {"repartition", "changelog", "topic"} <= kinds, ours  # the subscription topics end in -topic


@pytest.mark.parametrize("broker_name", ["ebb", "kafka"])
def test_the_app_closes_cleanly(runs, broker_name):
    line = ok(runs[0] if broker_name == "ebb" else runs[1], "topology_closed")
    assert "RUNNING" in line["states"] and line["closed"] and line["final"] == "NOT_RUNNING", line
