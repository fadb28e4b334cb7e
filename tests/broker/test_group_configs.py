"""Group configs (KIP-848's GROUP config resource, type 32) on one broker: what Kafka 4.3.1 answers is
judged in tests/differential/test_group_configs_against_kafka.py; here what only Ebb can show — each
config documented, the values kept in the embedded store across a restart and gone from it when the
last is deleted, the broker's group.* properties checked at start, librdkafka's admin client
(confluent-kafka) describing and altering a group's configs, and `ebb configs --group`."""

from __future__ import annotations

import json
import subprocess

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from broker.config import ConfigError, load_config
from broker.group_configs import GROUP_CONFIGS
from protocol.enums import ConfigSource
from protocol.errors import ErrorCode
from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from tests.broker.wire_client import WireClient
from tests.support.ebb_cli import ebb

GROUP_TYPE, SET, DELETE = 32, 0, 1
Resource = DescribeConfigsRequest.DescribeConfigsResource
Alter = IncrementalAlterConfigsRequest.AlterConfigsResource


@pytest.fixture(scope="module")
def broker_overrides():
    return {"group.share.max.delivery.count.limit": "8"}


def _describe(client, group, version=4, documentation=False) -> dict:
    request = DescribeConfigsRequest(resources=[Resource(resource_type=GROUP_TYPE, resource_name=group,
                                                         configuration_keys=None)],
                                     include_synonyms=True, include_documentation=documentation)
    [result] = client.send(request, version).results
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: c for c in result.configs}


def _set(client, group, *ops):
    request = IncrementalAlterConfigsRequest(resources=[Alter(resource_type=GROUP_TYPE, resource_name=group, configs=[
        Alter.AlterableConfig(name=k, config_operation=o, value=v) for k, o, v in ops])], validate_only=False)
    [result] = client.send(request, 1).responses
    return result


def test_every_config_is_documented(broker):
    with WireClient(broker.port) as client:
        configs = _describe(client, "documented", documentation=True)
    assert set(configs) == set(GROUP_CONFIGS)
    assert all(c.documentation for c in configs.values())


def test_the_broker_bounds_come_from_its_properties(broker):
    with WireClient(broker.port) as client:
        assert _set(client, "bounded", ("share.delivery.count.limit", SET, "9")).error_code == ErrorCode.INVALID_CONFIG
        assert _set(client, "bounded", ("share.delivery.count.limit", SET, "8")).error_code == ErrorCode.NONE


def test_kept_across_a_restart_and_gone_when_deleted(broker):
    with WireClient(broker.port) as client:
        assert _set(client, "kept", ("consumer.heartbeat.interval.ms", SET, "7000"),
                    ("share.isolation.level", SET, "read_committed")).error_code == ErrorCode.NONE
    broker.restart()
    with WireClient(broker.port) as client:
        configs = _describe(client, "kept")
        assert (configs["consumer.heartbeat.interval.ms"].value, configs["share.isolation.level"].value) == (
            "7000", "read_committed")
        assert configs["share.isolation.level"].config_source == ConfigSource.GROUP_CONFIG
        assert _set(client, "kept", ("consumer.heartbeat.interval.ms", DELETE, None),
                    ("share.isolation.level", DELETE, None)).error_code == ErrorCode.NONE
        assert all(c.config_source == ConfigSource.DEFAULT_CONFIG for c in _describe(client, "kept").values())
    store = (broker.data_dir / "logs" / "ebb-metadata.json").read_text()
    assert "/config/groups/bounded" in store and "/config/groups/kept" not in store


def test_bad_group_properties_stop_the_start():
    with pytest.raises(ConfigError, match="group.consumer.heartbeat.interval.ms"):
        load_config(None, ["group.consumer.heartbeat.interval.ms=often"])
    with pytest.raises(ConfigError, match="group.share.session.timeout.ms"):
        load_config(None, ["group.share.session.timeout.ms=90000"])  # above its maximum, 60000
    assert load_config(None, ["group.consumer.max.session.timeout.ms=90000"]).group_config_properties[
        "group.consumer.max.session.timeout.ms"] == 90000


def test_librdkafka_admin_client_describes_and_alters_a_groups_configs(broker):
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
    resource = ConfigResource(ResourceType.GROUP, "librdkafka-group")
    [described] = admin.describe_configs([resource]).values()
    configs = described.result(timeout=10)
    assert set(configs) == set(GROUP_CONFIGS)
    assert (configs["consumer.session.timeout.ms"].value, configs["consumer.session.timeout.ms"].source) == (
        "45000", ConfigSource.DEFAULT_CONFIG)
    change = ConfigResource(ResourceType.GROUP, "librdkafka-group", incremental_configs=[ConfigEntry(
        "consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
    [altered] = admin.incremental_alter_configs([change]).values()
    altered.result(timeout=10)
    [described] = admin.describe_configs([resource]).values()
    entry = described.result(timeout=10)["consumer.session.timeout.ms"]
    assert (entry.value, entry.source) == ("50000", ConfigSource.GROUP_CONFIG)
    refused = ConfigResource(ResourceType.GROUP, "librdkafka-group", incremental_configs=[ConfigEntry(
        "consumer.session.timeout.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    [future] = admin.incremental_alter_configs([refused]).values()
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=10)
    assert raised.value.args[0].code() == ErrorCode.INVALID_CONFIG


def _ebb(broker, *args: str) -> subprocess.CompletedProcess:
    return ebb(*args, "--bootstrap-server", f"127.0.0.1:{broker.port}")


def test_ebb_configs_for_a_group(broker):
    altered = _ebb(broker, "configs", "alter", "--group", "cli-group", "--add-config",
                   "consumer.session.timeout.ms=55000,share.auto.offset.reset=earliest")
    assert altered.returncode == 0, altered.stderr
    shown = _ebb(broker, "configs", "describe", "--group", "cli-group", "--output", "json")
    assert shown.returncode == 0, shown.stderr
    configs = {c["name"]: (c["value"], c["source"]) for c in json.loads(shown.stdout)["configs"]}
    assert configs == {"consumer.session.timeout.ms": ("55000", "GROUP_CONFIG"),
                       "share.auto.offset.reset": ("earliest", "GROUP_CONFIG")}
    refused = _ebb(broker, "configs", "alter", "--group", "cli-group", "--add-config", "no.such.config=1")
    assert refused.returncode != 0 and "Unknown group config name: no.such.config" in refused.stderr
