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
ALLOWED_HERE = {**ALLOWED, ("create bp", "topics[bp].configs[retention.ms].config_source"):
                "Kafka's CreateTopics and DescribeConfigs disagree; Ebb follows DescribeConfigs"}

BROKER_PROPERTIES = {"log.retention.hours": "2", "message.max.bytes": "2000000", "log.segment.bytes": "50000000"}


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return BROKER_PROPERTIES


def describe_under_broker_properties(peer: Peer) -> None:
    create(peer, "create bp", topic("bp", segment_ms="100000"))
    peer.wait_for_leaders("bp", 1)
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    peer.ask("describe with synonyms", DescribeConfigsRequest(resources=[Resource(
        resource_type=2, resource_name="bp", configuration_keys=None)], include_synonyms=True), 4)


def test_topic_configs_under_broker_properties(ebb_peer, kafka_peer):
    found = compare(describe_under_broker_properties, ebb_peer, kafka_peer, ALLOWED_HERE, ignore=_config_difference)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
