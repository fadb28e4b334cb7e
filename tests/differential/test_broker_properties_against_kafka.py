"""Kafka and Ebb started with the same broker properties describe a topic's configs the same way:
values in force, sources and synonyms (Kafka lists no broker synonym before the topic config's own
broker property, so a static log.retention.hours shows as DEFAULT_CONFIG under retention.ms)."""

from __future__ import annotations

import pytest

from protocol.messages import DescribeConfigsRequest
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED, _config_difference, create, topic

pytestmark = pytest.mark.timeout(300)

# Kafka itself is of two minds here: its controller's CreateTopics answer gives retention.ms the source
# STATIC_BROKER_CONFIG (log.retention.hours is set), its broker's DescribeConfigs DEFAULT_CONFIG. Ebb
# answers both as DescribeConfigs does.
ALLOWED_HERE = {**ALLOWED, **{("create bp", f"topics[bp].configs[{name}].config_source"):
                "Kafka's CreateTopics and DescribeConfigs disagree; Ebb follows DescribeConfigs"
                for name in ("retention.ms", "segment.jitter.ms")}}

BROKER_PROPERTIES = {"log.retention.hours": "2", "message.max.bytes": "2000000", "log.segment.bytes": "50000000",
                     "log.roll.jitter.hours": "1"}


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return BROKER_PROPERTIES


def describe_under_broker_properties(peer: Peer) -> None:
    create(peer, "create bp", topic("bp", segment_ms="100000"))
    peer.wait_for_leaders("bp", 1)
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    peer.ask("describe with synonyms", DescribeConfigsRequest(resources=[Resource(
        resource_type=2, resource_name="bp", configuration_keys=None)], include_synonyms=True), 4)
    roll_keys = ["log.roll.ms", "log.roll.hours", "log.roll.jitter.ms", "log.roll.jitter.hours"]
    peer.ask("the broker's roll properties", DescribeConfigsRequest(resources=[Resource(
        resource_type=4, resource_name="1", configuration_keys=roll_keys)], include_synonyms=True), 4)


def test_topic_configs_under_broker_properties(ebb_peer, kafka_peer):
    found = compare(describe_under_broker_properties, ebb_peer, kafka_peer, ALLOWED_HERE, ignore=_config_difference)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
