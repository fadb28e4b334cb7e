"""Metrics of a three-broker cluster (broker/metrics/), scraped from real broker processes: a follower
that stops fetching (SIGSTOP: still registered, so the low watermark waits for it) parks a
DeleteRecords until it expires, and drops out of the ISR, which raises under-replicated partitions;
once it runs again it rejoins and the gauge falls back. The followers fetch in fetch sessions."""

from __future__ import annotations

import signal

import pytest

from protocol.errors import ErrorCode
from tests.broker.data_wire import WireClient, batch, produce
from tests.cluster.three_brokers import PARKED_DELETES, leader_of, new_topic, scrape_while_a_delete_parks, three_brokers
from tests.support.broker_process import free_port
from tests.support.metrics_scrape import scrape, value
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(180)


def test_a_stopped_follower_parks_deletes_and_raises_under_replicated_partitions(zk_connect, tmp_path):
    ports = {n: free_port() for n in (1, 2, 3)}
    # A long ZooKeeper session keeps the stopped follower registered (alive) for the whole test; a short
    # replica.lag.time.max.ms drops it from the ISR soon.
    extra = {"zookeeper.session.timeout.ms": "60000", "replica.lag.time.max.ms": "2000"}
    metrics = {n: {"ebb.metrics.listener": f"http://127.0.0.1:{port}"} for n, port in ports.items()}
    with three_brokers(zk_connect, tmp_path, extra, metrics) as cluster:
        topic = new_topic(cluster)
        leader = leader_of(cluster, topic)
        leader_url = f"http://127.0.0.1:{ports[next(n for n, b in cluster.items() if b is leader)]}/metrics"
        follower = next(b for b in cluster.values() if b is not leader)
        with WireClient(leader.port) as client:
            assert produce(client, topic, 0, batch([b"v%d" % i for i in range(10)]), acks=-1).error_code == \
                ErrorCode.NONE
        wait_for(lambda: value(scrape(leader_url), "kafka_server_replicamanager_underreplicatedpartitions") == 0,
                 what="every partition in sync before the follower stops")
        before = scrape(leader_url)
        # Both followers fetch from the leader in fetch sessions (KIP-227), as Kafka's do.
        assert value(before, "kafka_server_fetchsessioncache_numincrementalfetchsessions") >= 2

        follower.process.send_signal(signal.SIGSTOP)
        try:
            scrape_while_a_delete_parks(leader, leader_url, topic, 5)
            after = scrape(leader_url)
            assert value(after, "ebb_purgatory_expirations_total", **PARKED_DELETES) == \
                value(before, "ebb_purgatory_expirations_total", **PARKED_DELETES) + 1
            assert value(after, "kafka_server_delayedoperationpurgatory_numdelayedoperations", **PARKED_DELETES) == 0
            assert value(after, "ebb_partition_lowwatermark", topic=topic, partition="0") == 0
            assert value(after, "kafka_log_log_logstartoffset", topic=topic, partition="0") == 5
            wait_for(lambda: value(scrape(leader_url), "kafka_server_replicamanager_underreplicatedpartitions") >= 1,
                     what="the stopped follower out of the ISR")
            shrunk = scrape(leader_url)
            assert value(shrunk, "kafka_cluster_partition_underreplicated", topic=topic, partition="0") == 1
            assert value(shrunk, "kafka_server_replicamanager_isrshrinks_total") > \
                value(before, "kafka_server_replicamanager_isrshrinks_total")
        finally:
            follower.process.send_signal(signal.SIGCONT)
        wait_for(lambda: value(scrape(leader_url), "kafka_cluster_partition_underreplicated",
                               topic=topic, partition="0") == 0, what="the follower back in the ISR")
        healed = scrape(leader_url)
        assert value(healed, "kafka_server_replicamanager_isrexpands_total") > \
            value(before, "kafka_server_replicamanager_isrexpands_total")
        assert value(healed, "ebb_partition_lowwatermark", topic=topic, partition="0") == 5
        assert sum(value(scrape(f"http://127.0.0.1:{p}/metrics"),
                         "kafka_controller_kafkacontroller_activecontrollercount") for p in ports.values()) == 1
