"""Kafka's Java producer and Kafka Streams against three Ebb brokers on ZooKeeper.

The same checks as tests/interop/test_producer.py and test_streams.py, with every topic replicated
three ways (the suites' own with replication factor 3, the Streams app's internal ones through
default.replication.factor): the
idempotent producer's acks=all waits for the followers, and Streams' purge of its repartition topic
is an all-replica DeleteRecords that completes once every follower has moved its log start offset.
One JVM runs the `producer` and `streams` suites of ebb.interop against all three brokers.
"""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.three_brokers import metadata_of, three_brokers
from tests.interop.conftest import java  # noqa: F401 - the fixture that builds and runs the Java checks
from tests.interop.test_producer import test_idempotent_producer_round_trip  # noqa: F401
from tests.interop.test_streams import (  # noqa: F401
    PREFIX,
    test_counts_after_a_repartition,
    test_internal_topics,
    test_streams_purges_its_repartition_topic_with_delete_records,
    test_streams_runs_and_closes_cleanly,
)

pytestmark = pytest.mark.timeout(600)


REPLICAS: dict[str, set[int]] = {}  # topic -> the replica counts of its partitions, read before the brokers stop


@pytest.fixture(scope="module")
def steps(java, zk_server, tmp_path_factory):  # noqa: F811 - `java` is the imported fixture
    connect = f"{zk_server.connect}/java-{uuid.uuid4().hex[:12]}"
    with three_brokers(connect, tmp_path_factory.mktemp("java-cluster")) as brokers:
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        found = java.interop(bootstrap, PREFIX, "producer", "streams", replication=3)
        for topic in metadata_of(brokers[1]).topics:
            REPLICAS[topic.name] = {len(p.replica_nodes) for p in topic.partitions}
        return found


def test_every_topic_has_three_replicas(steps):
    assert f"{PREFIX}-app-by-word-repartition" in REPLICAS and f"{PREFIX}-words" in REPLICAS, REPLICAS
    assert all(counts == {3} for counts in REPLICAS.values()), REPLICAS
