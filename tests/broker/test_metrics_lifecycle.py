"""A topic's metrics across create -> delete -> re-create, as Kafka behaves: its series go with its
partitions, a re-created topic counts from zero, and the broker-wide counts follow (issue 27)."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.messages import DeleteTopicsRequest
from tests.broker.data_wire import batch, create_topic, fetch, produce
from tests.support.broker_process import free_port
from tests.support.metrics_scrape import Samples, scrape, value

METRICS_PORT = free_port()
TOPIC = "cycled"


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"ebb.metrics.listener": f"http://127.0.0.1:{METRICS_PORT}"}


@pytest.fixture
def url(broker) -> str:
    return f"http://127.0.0.1:{METRICS_PORT}/metrics"


def of_topic(samples: Samples, topic: str) -> dict[str, float]:
    """Every sample labelled with this topic, by name and partition."""
    found = {}
    for (name, labels), sample in samples.items():
        labels = dict(labels)
        if labels.get("topic") == topic:
            found[f"{name}{{partition={labels.get('partition', '-')}}}"] = sample
    return found


def delete_topic(client, name: str) -> None:
    request = DeleteTopicsRequest(topic_names=[name], timeout_ms=10_000)
    answer = client.request(request, 4)
    assert [(r.name, r.error_code) for r in answer.responses] == [(name, ErrorCode.NONE)]


def test_a_deleted_topic_leaves_no_series_and_a_recreated_one_counts_from_zero(url, client):
    baseline = scrape(url)
    create_topic(client, TOPIC, partitions=2)
    first = batch([b"one", b"two", b"three"])
    for partition in (0, 1):
        assert produce(client, TOPIC, partition, first).error_code == ErrorCode.NONE
    assert fetch(client, TOPIC, 0, 0).error_code == ErrorCode.NONE
    live = scrape(url)
    series = of_topic(live, TOPIC)
    for name in ("kafka_server_brokertopicmetrics_bytesin_total", "kafka_server_brokertopicmetrics_messagesin_total",
                 "kafka_server_brokertopicmetrics_bytesout_total"):
        assert f"{name}{{partition=-}}" in series
    for name in ("ebb_partition_leader", "ebb_partition_lowwatermark", "kafka_cluster_partition_underreplicated",
                 "kafka_cluster_partition_insyncreplicascount", "kafka_log_log_logstartoffset"):
        assert f"{name}{{partition=1}}" in series
    assert value(live, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 6
    counts = ("kafka_server_replicamanager_partitioncount", "kafka_server_replicamanager_leadercount",
              "kafka_controller_kafkacontroller_globalpartitioncount")
    for name in counts:
        assert value(live, name) == value(baseline, name) + 2, name

    delete_topic(client, TOPIC)
    gone = scrape(url)
    assert of_topic(gone, TOPIC) == {}
    for name in counts:
        assert value(gone, name) == value(baseline, name), name

    create_topic(client, TOPIC, partitions=1)
    again = batch([b"four"])
    assert produce(client, TOPIC, 0, again).error_code == ErrorCode.NONE
    reborn = scrape(url)
    assert value(reborn, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 1
    assert value(reborn, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) == len(again)
    assert value(reborn, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) == 0
    assert value(reborn, "kafka_log_log_logendoffset", topic=TOPIC, partition="0") == 1
    assert value(reborn, "ebb_partition_leader", topic=TOPIC, partition="1") is None
    for name in counts:
        assert value(reborn, name) == value(baseline, name) + 1, name
