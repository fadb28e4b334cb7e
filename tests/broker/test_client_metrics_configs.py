"""Client metrics subscriptions (KIP-714's CLIENT_METRICS config resource, type 16): Kafka 4.3.1's
checks one by one (broker/client_metrics_configs.py), and on one broker what only Ebb can show — each
config documented, the subscription kept in the embedded store across a restart and gone from it
when its last config is deleted, and ALTER_CONFIGS / DESCRIBE_CONFIGS asked of the cluster. What Kafka
answers is judged in tests/differential/test_client_metrics_against_kafka.py."""

from __future__ import annotations

import pytest

from broker.client_metrics_configs import CLIENT_METRICS_CONFIGS, ClientMetricsError, describe, validate
from protocol.enums import ConfigSource, ConfigType
from protocol.errors import ErrorCode
from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest, ListConfigResourcesRequest
from tests.broker.wire_client import WireClient

CLIENT_METRICS, SET, DELETE, APPEND, SUBTRACT = 16, 0, 1, 2, 3
Resource = DescribeConfigsRequest.DescribeConfigsResource
Alter = IncrementalAlterConfigsRequest.AlterConfigsResource


def test_values_are_kept_as_kafka_writes_them_back():
    assert validate("s", {"metrics": " a.b , * ", "interval.ms": " 100 ",
                          "match": "client_id = x ,client_source_port=1"}) == {
        "metrics": "a.b,*", "interval.ms": "100", "match": "client_id = x,client_source_port=1"}
    assert validate("s", {"interval.ms": "3600000", "metrics": "", "match": "  "}) == {
        "interval.ms": "3600000", "metrics": "", "match": ""}
    assert validate("s", {"metrics": "a,a", "match": "client_id=a,client_id=a"})["metrics"] == "a,a"  # Kafka: no check
    assert validate("s", {}) == {}
    # Java's split, which Kafka's check uses, drops trailing empty parts: a trailing '=' is no second one
    assert validate("s", {"match": "client_id=a="}) == {"match": "client_id=a="}


@pytest.mark.parametrize("name, configs, code, message", [
    ("", {"metrics": "a"}, ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"),
    ("s", {"metricz": "a"}, ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: metricz"),
    ("s", {"interval.ms": "99"}, ErrorCode.INVALID_REQUEST,
     "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ("s", {"interval.ms": "3600001"}, ErrorCode.INVALID_REQUEST,
     "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ("s", {"interval.ms": "2147483648"}, ErrorCode.INVALID_CONFIG,
     "Invalid value 2147483648 for configuration interval.ms: Not a number of type INT"),
    ("s", {"interval.ms": "1_000"}, ErrorCode.INVALID_CONFIG,  # Python's int() takes it, Java's parseInt not
     "Invalid value 1_000 for configuration interval.ms: Not a number of type INT"),
    ("s", {"interval.ms": ""}, ErrorCode.INVALID_CONFIG,
     "Invalid value  for configuration interval.ms: Not a number of type INT"),
    ("s", {"metrics": "a,,b"}, ErrorCode.INVALID_CONFIG, "Configuration 'metrics' values must not be empty."),
    ("s", {"match": " ,"}, ErrorCode.INVALID_CONFIG, "Configuration 'match' values must not be empty."),
    ("s", {"match": "client_id"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id"),
    ("s", {"match": "client_id="}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id="),
    ("s", {"match": "=x"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: =x"),
    ("s", {"match": "client_id=a=b"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_id=a=b"),
    ("s", {"match": "client_name=x"}, ErrorCode.INVALID_CONFIG, "Illegal client matching pattern: client_name=x"),
    ("s", {"match": "client_id=x,client_software_version=[1-"}, ErrorCode.INVALID_CONFIG,
     "Illegal client matching pattern: client_software_version=[1-"),
    # Kafka's order: unknown names, then each value's type in the table's order, the interval's bounds, the match
    ("s", {"match": "client_id=[", "metricz": "a"}, ErrorCode.INVALID_REQUEST,
     "Unknown client metrics configuration: metricz"),
    ("s", {"match": "client_id=[", "interval.ms": "5"}, ErrorCode.INVALID_REQUEST,
     "Invalid value 5 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ("s", {"match": ",", "interval.ms": "x", "metrics": "a,,"}, ErrorCode.INVALID_CONFIG,
     "Configuration 'metrics' values must not be empty."),
    ("s", {"interval.ms": "5", "metrics": "a,,"}, ErrorCode.INVALID_CONFIG,
     "Configuration 'metrics' values must not be empty."),
])
def test_kafkas_refusals(name, configs, code, message):
    with pytest.raises(ClientMetricsError) as refused:
        validate(name, configs)
    assert (refused.value.error_code, refused.value.message) == (code, message)


def test_described_with_kafkas_defaults_and_sources():
    entries = describe({"interval.ms": "1000"})
    assert [(e.name, e.value, e.source, e.type) for e in entries] == [
        ("interval.ms", "1000", ConfigSource.CLIENT_METRICS_CONFIG, ConfigType.INT),
        ("match", "", ConfigSource.DEFAULT_CONFIG, ConfigType.LIST),
        ("metrics", "", ConfigSource.DEFAULT_CONFIG, ConfigType.LIST)]
    assert [(s.name, s.value, s.source) for s in entries[0].synonyms] == [
        ("interval.ms", "1000", ConfigSource.CLIENT_METRICS_CONFIG)]
    assert entries[1].synonyms == () and describe({})[0].value == "300000"


def _describe(client, name, documentation=False) -> dict:
    request = DescribeConfigsRequest(resources=[Resource(resource_type=CLIENT_METRICS, resource_name=name,
                                                         configuration_keys=None)],
                                     include_synonyms=True, include_documentation=documentation)
    [result] = client.send(request, 4).results
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: c for c in result.configs}


def _alter(client, name, *ops):
    request = IncrementalAlterConfigsRequest(validate_only=False, resources=[Alter(
        resource_type=CLIENT_METRICS, resource_name=name, configs=[
            Alter.AlterableConfig(name=k, config_operation=o, value=v) for k, o, v in ops])])
    [result] = client.send(request, 1).responses
    return result


def _listed(client) -> list[str]:
    return sorted(r.resource_name for r in client.send(ListConfigResourcesRequest(), 0).config_resources)


def test_kept_across_a_restart_and_gone_when_deleted(broker):
    with WireClient(broker.port) as client:
        assert _alter(client, "kept", ("metrics", SET, "org.apache.kafka.producer."),
                      ("interval.ms", SET, "1000")).error_code == ErrorCode.NONE
        assert _alter(client, "also/kept", ("match", SET, "client_id=.*")).error_code == ErrorCode.NONE
    broker.restart()
    with WireClient(broker.port) as client:
        configs = _describe(client, "kept", documentation=True)
        assert set(configs) == set(CLIENT_METRICS_CONFIGS) and all(c.documentation for c in configs.values())
        assert (configs["metrics"].value, configs["interval.ms"].value) == ("org.apache.kafka.producer.", "1000")
        assert configs["interval.ms"].config_source == ConfigSource.CLIENT_METRICS_CONFIG
        assert _listed(client) == ["also/kept", "kept"]
        assert _alter(client, "kept", ("metrics", DELETE, None), ("interval.ms", DELETE, None)).error_code == 0
        assert all(c.config_source == ConfigSource.DEFAULT_CONFIG for c in _describe(client, "kept").values())
        assert _listed(client) == ["also/kept"]
    store = (broker.data_dir / "logs" / "ebb-metadata.json").read_text()
    assert "/config/client-metrics/also%2Fkept" in store and "/config/client-metrics/kept" not in store


def test_an_unnamed_subscription_has_its_operations_judged_first(broker):
    """Kafka builds the changes (APPEND and SUBTRACT: INVALID_CONFIG) before it checks the name
    (INVALID_REQUEST); a SET or DELETE on no name is refused for the name."""
    with WireClient(broker.port) as client:
        for ops, code in ((("metrics", APPEND, "a"), ErrorCode.INVALID_CONFIG),
                          (("match", SUBTRACT, "client_id=a"), ErrorCode.INVALID_CONFIG),
                          (("metrics", SET, "a"), ErrorCode.INVALID_REQUEST),
                          (("metrics", DELETE, None), ErrorCode.INVALID_REQUEST)):
            assert _alter(client, "", ops).error_code == code, ops
