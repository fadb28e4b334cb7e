"""Kafka 4.3.1's rules for every topic config Ebb accepts, found by a sweep of boundary values: each
value is set with IncrementalAlterConfigs (validate_only) on a topic, with AlterConfigs and given to
CreateTopics (validate_only), and both brokers must accept or refuse it alike. The same for the
broker-level property behind each (a dynamic cluster-wide default, validate_only)."""

from __future__ import annotations

import pytest

from broker.topic_configs import TOPIC_CONFIGS
from protocol.enums import ConfigType
from protocol.messages import AlterConfigsRequest, IncrementalAlterConfigsRequest
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED, create, topic

pytestmark = pytest.mark.timeout(600)

# Ebb's own topic configs, which Kafka does not know; remote.storage.enable=true needs tiered storage
# on both sides (Kafka refuses it without a remote log manager, Ebb has none).
EBB_ONLY = {"retention.min.timestamp", "retention.committed.groups", "erasure.max.delay.ms"}
NUMBERS = ["-2", "-1", "0", "1", "2", "11", "12", "13", "60", "61", "100", "1023", "1024", "1048575", "1048576",
           "2147483647", "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808", "1.5", "x", ""]
VALUES = {
    ConfigType.INT: NUMBERS, ConfigType.LONG: NUMBERS, ConfigType.SHORT: NUMBERS,
    ConfigType.DOUBLE: ["-0.1", "0", "0.5", "1", "1.1", "NaN", "x", ""],
    ConfigType.BOOLEAN: ["true", "false", "TRUE", "yes", ""],
}
LIST_VALUES = {
    "cleanup.policy": ["delete", "compact", "compact,delete", "", "delete,delete", "other", " delete "],
    "follower.replication.throttled.replicas": ["*", "0:1", "0:1,1:2", "", "0", "x:1", "*,0:1"],
    "leader.replication.throttled.replicas": ["*", "0:1", "", "0"],
}
STRING_VALUES = {
    "compression.type": ["producer", "gzip", "zstd", "lz4", "snappy", "uncompressed", "none", "GZIP", ""],
    "message.timestamp.type": ["CreateTime", "LogAppendTime", "createtime", ""],
}


def values_of(name: str) -> list[str]:
    definition = TOPIC_CONFIGS[name]
    if definition.type is ConfigType.LIST:
        return LIST_VALUES[name]
    if definition.type is ConfigType.STRING:
        return STRING_VALUES[name]
    return VALUES[definition.type]


SWEPT = sorted(set(TOPIC_CONFIGS) - EBB_ONLY)


def sweep(peer: Peer, names: list[str]) -> None:
    create(peer, "create swept", topic("swept"))
    peer.wait_for_leaders("swept", 1)
    Inc = IncrementalAlterConfigsRequest.AlterConfigsResource
    Legacy = AlterConfigsRequest.AlterConfigsResource
    for name in names:
        for value in values_of(name):
            if name == "remote.storage.enable" and value.lower() == "true":
                continue
            peer.ask(f"incremental {name}={value!r}", IncrementalAlterConfigsRequest(resources=[Inc(
                resource_type=2, resource_name="swept", configs=[Inc.AlterableConfig(
                    name=name, config_operation=0, value=value)])], validate_only=True), 1)
            peer.ask(f"legacy {name}={value!r}", AlterConfigsRequest(resources=[Legacy(
                resource_type=2, resource_name="swept", configs=[Legacy.AlterableConfig(
                    name=name, value=value)])], validate_only=True), 2)
            peer.ask(f"create {name}={value!r}", *_create_validate_only(name, value))


def _create_validate_only(name: str, value: str):
    from protocol.messages import CreateTopicsRequest
    return CreateTopicsRequest(topics=[topic("never", **{name.replace(".", "_"): value})], timeout_ms=30_000,
                               validate_only=True), 7


def only_codes(path: str) -> bool:
    """Judged here: the error code of each answer (the configs a validate-only CreateTopics lists are
    judged by the other scenarios)."""
    return not path.endswith("error_code")


@pytest.mark.parametrize("names", [SWEPT[i::4] for i in range(4)], ids=[f"part{i}" for i in range(4)])
def test_topic_config_rules(ebb_peer, kafka_peer, names):
    found = compare(lambda peer: sweep(peer, names), ebb_peer, kafka_peer, ALLOWED, ignore=only_codes)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
