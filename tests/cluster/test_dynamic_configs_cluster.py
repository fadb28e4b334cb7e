"""Dynamic broker configs in a cluster: a cluster-wide default set through one broker is in force on
all three at once (each follows `/config/brokers/<default>` in ZooKeeper) and trims the partitions
every broker holds, leader and followers, without a restart; a change made while the controller is
down reaches the others, and the stopped broker finds it when it comes back; two brokers changing the
cluster-wide defaults at once lose neither change."""

from __future__ import annotations

import concurrent.futures
import signal
import time

import pytest

from protocol.enums import ConfigSource
from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from tests.broker.data_wire import WireClient, batch, list_offsets, produce
from tests.cluster.three_brokers import E, leader_of, metadata_of, new_topic, start_offset_checkpoint, three_brokers
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(240)

BROKER, TOPIC = 4, 2
# Only the change itself may trim: the periodic retention pass does not start within the test.
# Ebb-only: a segment per batch, below Kafka's 1 MiB minimum.
SETTINGS = {"log.initial.task.delay.ms": "600000", "log.flush.start.offset.checkpoint.interval.ms": "300",
            "ebb.testing.small.segments.enable": "true"}


def set_cluster_default(broker, key: str, value: str) -> None:
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(resources=[Resource(resource_type=BROKER, resource_name="", configs=[
        Resource.AlterableConfig(name=key, config_operation=0, value=value)])], validate_only=False)
    with WireClient(broker.port) as client:
        [result] = client.request(request, 1).responses
    assert result.error_code == E.NONE, result.error_message


def topic_config(broker, topic: str, key: str) -> tuple[str | None, int]:
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC, resource_name=topic, configuration_keys=[key])])
    with WireClient(broker.port) as client:
        [result] = client.request(request, 4).results
    [entry] = result.configs
    return entry.value, entry.config_source


def test_a_cluster_default_retention_trims_on_every_broker(zk_connect, tmp_path):
    with three_brokers(zk_connect, tmp_path, SETTINGS) as cluster:
        # tiny segments: each batch gets its own, so retention can drop the two old ones
        topic = new_topic(cluster, prefix="dynamic", configs={"segment.bytes": "100"})
        now = int(time.time() * 1000)
        with WireClient(leader_of(cluster, topic).port) as client:
            for timestamp in (now - 3_600_000, now - 3_000_000, now):
                assert produce(client, topic, 0, batch([b"v" * 20], timestamps=[timestamp]),
                               acks=-1).error_code == E.NONE
        wait_for(lambda: all(start_offset_checkpoint(b, topic) in (None, 0) for b in cluster.values()),
                 what="nothing trimmed yet")

        set_cluster_default(cluster[2], "log.retention.ms", "600000")
        wait_for(lambda: all(start_offset_checkpoint(b, topic) == 2 for b in cluster.values()),
                 what="every broker's replica trimmed past the old batches")
        with WireClient(leader_of(cluster, topic).port) as client:
            assert list_offsets(client, topic, 0, -2).offset == 2
        for broker in cluster.values():
            assert topic_config(broker, topic, "retention.ms") == \
                ("600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)

        controller = cluster[metadata_of(cluster[1]).controller_id]
        controller.stop(signal.SIGKILL)
        survivor = next(b for b in cluster.values() if b is not controller)
        set_cluster_default(survivor, "log.retention.ms", "900000")
        for broker in cluster.values():
            if broker is not controller:
                wait_for(lambda b=broker: topic_config(b, topic, "retention.ms")[0] == "900000",
                         what="the change in force while the controller is down")
        controller.start()
        assert topic_config(controller, topic, "retention.ms") == \
            ("900000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        assert start_offset_checkpoint(controller, topic) == 2

        # Two brokers altering the cluster-wide defaults at once, each its own key: neither change is lost.
        keys = {1: "message.max.bytes", 3: "leader.replication.throttled.rate"}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for done in [pool.submit(lambda n=n: [set_cluster_default(cluster[n], keys[n], str(2_000_000 + i))
                                                  for i in range(10)]) for n in keys]:
                done.result()
        request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=BROKER, resource_name="", configuration_keys=None)])
        with WireClient(cluster[2].port) as client:
            wait_for(lambda: {c.name: c.value for c in client.request(request, 4).results[0].configs} == {
                "log.retention.ms": "900000", keys[1]: "2000009", keys[3]: "2000009"},
                what="both brokers' last changes in the cluster-wide defaults")
