"""DescribeConfigs (v1-4), AlterConfigs (v0-2) and IncrementalAlterConfigs (v0-1) over the wire, every
error path; configs that take effect on the logs at once and survive restarts; kafka-python's and
confluent-kafka's admin clients against the broker."""

import signal
import time

import pytest

from broker.topic_configs import TOPIC_CONFIGS
from protocol.enums import ConfigSource, ConfigType
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from protocol.records import build_batch
from tests.broker.wire_client import WireClient, create_topic
from tests.support.broker_process import BrokerProcess

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DescribeResource = DescribeConfigsRequest.DescribeConfigsResource
AlterResource = AlterConfigsRequest.AlterConfigsResource
Alterable = AlterConfigsRequest.AlterConfigsResource.AlterableConfig
IncResource = IncrementalAlterConfigsRequest.AlterConfigsResource
IncAlterable = IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig
BROKER_PROPERTIES = {"log.retention.hours": "48", "compression.type": "gzip", "log.segment.bytes": "104857600",
                     # Ebb-only: a segment per batch, below Kafka's 1 MiB minimum (retention tests)
                     "ebb.testing.small.segments.enable": "true"}


@pytest.fixture(scope="module")
def broker_overrides():
    return BROKER_PROPERTIES


@pytest.fixture(scope="module")
def client(broker):
    with WireClient(broker.port) as c:
        yield c


def _describe(client, name, version=4, keys=None, resource_type=TOPIC, synonyms=False, documentation=False):
    request = DescribeConfigsRequest(
        resources=[DescribeResource(resource_type=resource_type, resource_name=name, configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=documentation if version >= 3 else False)
    [result] = client.send(request, version).results
    return result


def _configs(client, name, **kwargs) -> dict:
    result = _describe(client, name, **kwargs)
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: c for c in result.configs}


def _values(client, name) -> dict:
    return {k: c.value for k, c in _configs(client, name).items()}


def _alter(client, name, configs, version=2, validate_only=False, resource_type=TOPIC):
    request = AlterConfigsRequest(resources=[AlterResource(
        resource_type=resource_type, resource_name=name,
        configs=[Alterable(name=k, value=v) for k, v in configs])], validate_only=validate_only)
    [result] = client.send(request, version).responses
    assert (result.resource_type, result.resource_name) == (resource_type, name)
    return result


def _incremental(client, name, operations, version=1, validate_only=False, resource_type=TOPIC):
    request = IncrementalAlterConfigsRequest(resources=[IncResource(
        resource_type=resource_type, resource_name=name,
        configs=[IncAlterable(name=k, config_operation=op, value=v) for k, op, v in operations])],
        validate_only=validate_only)
    [result] = client.send(request, version).responses
    assert (result.resource_type, result.resource_name) == (resource_type, name)
    return result


# --- DescribeConfigs ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(1, 5))
def test_every_topic_config_is_listed_with_its_default_and_source(client, version):
    create_topic(client, "described", configs={"retention.bytes": "1000", "min.insync.replicas": "1"})
    configs = _configs(client, "described", version=version)
    assert sorted(configs) == sorted(TOPIC_CONFIGS)
    assert list(configs) == sorted(configs)
    expected = {
        "retention.bytes": ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "min.insync.replicas": ("1", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        # log.retention.hours=48 is in force, but Kafka lists no synonym before log.retention.ms, so
        # the source is DEFAULT_CONFIG (checked against Kafka 4.3: tests/differential)
        "retention.ms": (str(48 * 3600 * 1000), ConfigSource.DEFAULT_CONFIG),
        "compression.type": ("gzip", ConfigSource.STATIC_BROKER_CONFIG),
        "segment.bytes": ("104857600", ConfigSource.STATIC_BROKER_CONFIG),
        "cleanup.policy": ("delete", ConfigSource.DEFAULT_CONFIG),
        "max.message.bytes": ("1048588", ConfigSource.DEFAULT_CONFIG),
        "retention.min.timestamp": (None, ConfigSource.DEFAULT_CONFIG),
        "remote.storage.enable": ("false", ConfigSource.DEFAULT_CONFIG),
    }
    for name, (value, source) in expected.items():
        assert (configs[name].value, configs[name].config_source) == (value, source), name
    assert not any(c.read_only or c.is_sensitive or c.synonyms for c in configs.values())
    if version >= 3:
        assert configs["cleanup.policy"].config_type == ConfigType.LIST
        assert configs["retention.ms"].config_type == ConfigType.LONG
        assert configs["preallocate"].config_type == ConfigType.BOOLEAN
        assert configs["min.cleanable.dirty.ratio"].config_type == ConfigType.DOUBLE
        assert configs["segment.bytes"].config_type == ConfigType.INT
        assert configs["compression.type"].config_type == ConfigType.STRING
        assert configs["retention.ms"].documentation is None


@pytest.mark.parametrize("version", range(1, 5))
def test_synonyms(client, version):
    create_topic(client, "synonyms", configs={"retention.ms": "5000"})
    configs = _configs(client, "synonyms", version=version, synonyms=True)
    assert [(s.name, s.value, s.source) for s in configs["retention.ms"].synonyms] == [
        ("retention.ms", "5000", ConfigSource.DYNAMIC_TOPIC_CONFIG)]  # as Kafka 4.3 lists them
    assert [(s.name, s.value, s.source) for s in configs["cleanup.policy"].synonyms] == [
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG)]
    assert configs["remote.storage.enable"].synonyms == []  # no broker-level synonym, as in Kafka


@pytest.mark.parametrize("version", [3, 4])
def test_documentation(client, version):
    create_topic(client, "documented")
    configs = _configs(client, "documented", version=version, documentation=True)
    assert all(c.documentation for c in configs.values())
    assert "Unix milliseconds" in configs["retention.min.timestamp"].documentation


@pytest.mark.parametrize("version", range(1, 5))
def test_configuration_keys_filter(client, version):
    create_topic(client, "filtered")
    assert set(_configs(client, "filtered", version=version, keys=["retention.ms", "no.such.key"])) == {"retention.ms"}
    assert len(_configs(client, "filtered", version=version, keys=[])) == len(TOPIC_CONFIGS)  # empty means all


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_errors_are_per_resource(client, version):
    create_topic(client, "fine")
    resources = [(TOPIC, "no-such-topic"), (TOPIC, "bad name!"), (TOPIC, "fine"), (BROKER, "2"), (BROKER, "x"),
                 (BROKER_LOGGER, ""), (32, "group"), (32, ""), (16, "metrics"), (0, "unknown-type")]
    request = DescribeConfigsRequest(resources=[DescribeResource(resource_type=t, resource_name=n,
                                                                 configuration_keys=None) for t, n in resources])
    results = client.send(request, version).results
    assert [(r.resource_type, r.resource_name, r.error_code) for r in results] == [
        (TOPIC, "no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, "bad name!", ErrorCode.INVALID_TOPIC_EXCEPTION),
        (TOPIC, "fine", ErrorCode.NONE),
        (BROKER, "2", ErrorCode.INVALID_REQUEST),
        (BROKER, "x", ErrorCode.INVALID_REQUEST),
        (BROKER_LOGGER, "", ErrorCode.INVALID_REQUEST),
        (32, "group", ErrorCode.NONE),  # any group id: Kafka 4.3's group configs (test_group_configs.py)
        (32, "", ErrorCode.INVALID_REQUEST),
        (16, "metrics", ErrorCode.NONE),  # any subscription name: KIP-714's (test_client_metrics_configs.py)
        (0, "unknown-type", ErrorCode.INVALID_REQUEST),
    ]
    assert all(r.error_message and r.configs == [] for r in results if r.error_code)


@pytest.mark.parametrize("version", range(1, 5))
def test_broker_resource(client, version):
    configs = _configs(client, "1", version=version, resource_type=BROKER, synonyms=True)
    assert configs["node.id"].value == "1" and configs["node.id"].config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert configs["log.retention.hours"].value == "48"
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == \
        ("1", ConfigSource.DEFAULT_CONFIG)
    assert configs["auto.create.topics.enable"].value == "true"
    # Only what Kafka can change at runtime is writable (tests/broker/test_dynamic_broker_configs.py).
    assert not configs["log.retention.ms"].read_only and not configs["message.max.bytes"].read_only
    assert configs["num.partitions"].read_only and configs["log.dirs"].read_only
    if version >= 3:
        assert configs["num.partitions"].config_type == ConfigType.INT
        assert configs["auto.create.topics.enable"].config_type == ConfigType.BOOLEAN
    assert _configs(client, "", version=version, resource_type=BROKER) == {}  # no dynamic cluster defaults
    logger = _configs(client, "1", version=version, resource_type=BROKER_LOGGER)
    assert logger["root"].value == "INFO"


# --- AlterConfigs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(3))
def test_alter_configs_replaces_the_whole_override_set(client, version):
    name = f"altered-v{version}"
    create_topic(client, name, configs={"retention.ms": "1000", "segment.ms": "60000"})
    result = _alter(client, name, [("retention.bytes", "2048"), ("cleanup.policy", "compact, delete")], version)
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
    configs = _configs(client, name)
    assert configs["retention.bytes"].value == "2048"
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["retention.ms"].config_source == ConfigSource.DEFAULT_CONFIG  # back to the default
    assert configs["segment.ms"].value == "604800000"
    assert _alter(client, name, [("retention.bytes", "1")], version, validate_only=True).error_code == 0
    assert _values(client, name)["retention.bytes"] == "2048"


ALTER_ERRORS = [
    ("no-such-topic", [("retention.ms", "1")], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("bad name!", [("retention.ms", "1")], ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("target", [("no.such.config", "1")], ErrorCode.INVALID_CONFIG),
    ("target", [("retention.ms", "soon")], ErrorCode.INVALID_CONFIG),
    ("target", [("retention.ms", "-5")], ErrorCode.INVALID_CONFIG),
    ("target", [("message.timestamp.type", "Whenever")], ErrorCode.INVALID_CONFIG),
    ("target", [("retention.ms", None)], ErrorCode.INVALID_REQUEST),
    ("target", [("retention.ms", "1"), ("retention.ms", "2")], ErrorCode.INVALID_REQUEST),
]


@pytest.mark.parametrize("version", range(3))
def test_alter_configs_errors(client, version):
    create_topic(client, "target", configs={"retention.ms": "777"})
    for name, configs, error in ALTER_ERRORS:
        result = _alter(client, name, configs, version)
        assert result.error_code == error, (name, configs)
        assert result.error_message
    assert _values(client, "target")["retention.ms"] == "777"


@pytest.mark.parametrize("version", range(3))
def test_alter_configs_resources(client, version):
    create_topic(client, "twice")
    request = AlterConfigsRequest(resources=[
        AlterResource(resource_type=TOPIC, resource_name="twice", configs=[Alterable(name="retention.ms", value="1")]),
        AlterResource(resource_type=TOPIC, resource_name="twice", configs=[]),
        AlterResource(resource_type=BROKER, resource_name="1", configs=[]),
        AlterResource(resource_type=BROKER, resource_name="1", configs=[Alterable(name="num.partitions", value="3")]),
        AlterResource(resource_type=BROKER, resource_name="7", configs=[]),
        AlterResource(resource_type=BROKER_LOGGER, resource_name="1", configs=[]),
    ], validate_only=False)
    results = client.send(request, version).responses
    assert [(r.resource_type, r.error_code) for r in results] == [
        (TOPIC, ErrorCode.INVALID_REQUEST), (TOPIC, ErrorCode.INVALID_REQUEST),  # each copy of a duplicate
        (BROKER, ErrorCode.INVALID_REQUEST), (BROKER, ErrorCode.INVALID_REQUEST),  # "1" twice as well
        (BROKER, ErrorCode.INVALID_REQUEST), (BROKER_LOGGER, ErrorCode.INVALID_REQUEST)]
    assert _alter(client, "1", [], version, resource_type=BROKER).error_code == ErrorCode.NONE
    assert _alter(client, "", [("num.partitions", "3")], version, resource_type=BROKER).error_code == \
        ErrorCode.INVALID_REQUEST
    assert _values(client, "twice")["retention.ms"] != "1"


# --- IncrementalAlterConfigs ----------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_operations(client, version):
    name = f"incremental-v{version}"
    create_topic(client, name, configs={"segment.ms": "60000", "retention.bytes": "100"})
    steps = [
        ([("retention.ms", SET, "1000")], {"retention.ms": "1000", "segment.ms": "60000"}),
        ([("segment.ms", DELETE, None)], {"segment.ms": "604800000", "retention.bytes": "100"}),
        ([("no.such.key", DELETE, None)], {"retention.ms": "1000"}),  # deleting what is not set: no-op
        ([("cleanup.policy", APPEND, "compact")], {"cleanup.policy": "delete,compact"}),
        ([("cleanup.policy", APPEND, "compact,delete")], {"cleanup.policy": "delete,compact"}),
        ([("cleanup.policy", SUBTRACT, "delete")], {"cleanup.policy": "compact"}),
        ([("leader.replication.throttled.replicas", APPEND, "0:1")], {"leader.replication.throttled.replicas": "0:1"}),
        ([("retention.ms", DELETE, None), ("retention.bytes", SET, "200")],
         {"retention.ms": str(48 * 3600 * 1000), "retention.bytes": "200"}),
    ]
    for operations, expected in steps:
        result = _incremental(client, name, operations, version)
        assert (result.error_code, result.error_message) == (ErrorCode.NONE, None), operations
        values = _values(client, name)
        assert {k: values[k] for k in expected} == expected, operations
    assert _incremental(client, name, [("retention.bytes", SET, "5")], version, validate_only=True).error_code == 0
    assert _values(client, name)["retention.bytes"] == "200"


INCREMENTAL_ERRORS = [
    ("gone", [("retention.ms", SET, "1")], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("bad name!", [("retention.ms", SET, "1")], ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("inc-target", [("retention.ms", APPEND, "1")], ErrorCode.INVALID_CONFIG),  # not a list
    ("inc-target", [("retention.ms", SUBTRACT, "1")], ErrorCode.INVALID_CONFIG),
    ("inc-target", [("no.such.key", SET, "1")], ErrorCode.INVALID_CONFIG),
    ("inc-target", [("segment.ms", SET, "0")], ErrorCode.INVALID_CONFIG),
    ("inc-target", [("segment.bytes", SET, "60")], ErrorCode.INVALID_CONFIG),  # below even the test-only minimum
    ("inc-target", [("cleanup.policy", APPEND, "shred")], ErrorCode.INVALID_CONFIG),
    ("inc-target", [("retention.bytes", SET, "9"), ("retention.ms", SET, "x")], ErrorCode.INVALID_CONFIG),
    ("inc-target", [("retention.ms", SET, None)], ErrorCode.INVALID_REQUEST),
    ("inc-target", [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)], ErrorCode.INVALID_REQUEST),
    ("inc-target", [("retention.ms", 9, "1")], ErrorCode.INVALID_REQUEST),
]


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_errors_change_nothing(client, version):
    create_topic(client, "inc-target", configs={"retention.ms": "777"})
    for name, operations, error in INCREMENTAL_ERRORS:
        result = _incremental(client, name, operations, version)
        assert result.error_code == error, (name, operations)
        assert result.error_message
    values = _values(client, "inc-target")
    assert (values["retention.ms"], values["retention.bytes"], values["cleanup.policy"]) == ("777", "-1", "delete")


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_resources(client, version):
    create_topic(client, "inc-twice")
    request = IncrementalAlterConfigsRequest(resources=[
        IncResource(resource_type=TOPIC, resource_name="inc-twice", configs=[]),
        IncResource(resource_type=TOPIC, resource_name="inc-twice", configs=[]),
        IncResource(resource_type=BROKER, resource_name="1",
                    configs=[IncAlterable(name="num.partitions", config_operation=SET, value="2")]),
        IncResource(resource_type=BROKER, resource_name="", configs=[]),
        IncResource(resource_type=BROKER_LOGGER, resource_name="1",
                    configs=[IncAlterable(name="root", config_operation=SET, value="INFO")]),
        IncResource(resource_type=16, resource_name="metrics", configs=[]),  # a client metrics subscription
        IncResource(resource_type=64, resource_name="metrics", configs=[]),  # no such resource type
    ], validate_only=False)
    results = client.send(request, version).responses
    assert [r.error_code for r in results] == [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
                                              ErrorCode.INVALID_REQUEST, ErrorCode.NONE,
                                              ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_REQUEST]


TOO_LONG = "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes."
CLIENT_METRICS, GROUP = 16, 32


def test_values_longer_than_kafkas_controller_stores_are_refused(client):
    """Kafka's controller refuses a value over 32,767 Java chars (UTF-16 units) for every type it alters,
    before the type's own checks; only flexible versions carry such a string (v1, legacy v2)."""
    create_topic(client, "long-values")
    emoji = "\U0001F600" * 16384  # 16,384 code points, 32,768 UTF-16 units
    for kind, name, key, value in ((TOPIC, "long-values", "compression.type", "x" * 32768),
                                   (BROKER, "", "log.retention.ms", "1" * 32768),
                                   (GROUP, "g", "consumer.session.timeout.ms", "4" * 32768),
                                   (CLIENT_METRICS, "m", "metrics", "a" * 32768),
                                   (CLIENT_METRICS, "m", "metrics", emoji)):
        for result in (_incremental(client, name, [(key, SET, value)], 1, resource_type=kind),
                       _alter(client, name, [(key, value)], 2, resource_type=kind)):
            assert (result.error_code, result.error_message) == (ErrorCode.INVALID_CONFIG, TOO_LONG), (kind, key)
    assert _incremental(client, "m", [("metrics", SET, "a" * 32767)], 1, resource_type=CLIENT_METRICS,
                        validate_only=True).error_code == ErrorCode.NONE
    appended = _incremental(client, "m", [("metrics", APPEND, "a" * 32768)], 1, resource_type=CLIENT_METRICS)
    assert "because its type is not LIST" in appended.error_message  # the operation is judged first

    # What Kafka can be sent (its parser closes the connection on any string past 32,767 bytes): a list
    # grown past the limit by APPEND, refused so by Kafka 4.3.1 too (checked against a live node)
    throttled = "leader.replication.throttled.replicas"
    first, second = (",".join(f"{p}:1" for p in range(low, high)) for low, high in ((0, 4000), (4000, 5000)))
    assert _incremental(client, "long-values", [(throttled, APPEND, first)]).error_code == ErrorCode.NONE
    grown = _incremental(client, "long-values", [(throttled, APPEND, second)])
    assert (grown.error_code, grown.error_message) == (ErrorCode.INVALID_CONFIG, TOO_LONG)
    assert _values(client, "long-values")[throttled] == first


# --- effective at once, and durable ---------------------------------------------------------------


def _produce(client, topic, timestamp_ms):
    batch = build_batch([(b"k", b"v" * 20, [], timestamp_ms)])
    Partition = ProduceRequest.TopicProduceData.PartitionProduceData
    request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[Partition(index=0, records=batch)])])
    [topic_response] = client.send(request, 9).responses
    assert topic_response.partition_responses[0].error_code == ErrorCode.NONE


def _earliest(client, topic) -> int:
    Partition = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[Partition(partition_index=0, timestamp=-2, current_leader_epoch=-1)])])
    [partition] = client.send(request, 7).topics[0].partitions
    assert partition.error_code == ErrorCode.NONE
    return partition.offset


def test_retention_min_timestamp_takes_effect_at_once(client):
    # tiny segments: each batch gets its own, so retention can drop the old one and keep the new
    create_topic(client, "floor", configs={"segment.bytes": "100", "retention.ms": "-1"})
    now = int(time.time() * 1000)
    for timestamp in (now - 3_600_000, now - 60_000, now):
        _produce(client, "floor", timestamp)
    assert _earliest(client, "floor") == 0
    result = _incremental(client, "floor", [("retention.min.timestamp", SET, str(now - 600_000))])
    assert result.error_code == ErrorCode.NONE
    assert _earliest(client, "floor") == 1  # the batch older than the floor is gone, now
    assert _values(client, "floor")["retention.min.timestamp"] == str(now - 600_000)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_configs_survive_a_restart(tmp_path, stop):
    with BrokerProcess(tmp_path) as broker:
        with WireClient(broker.port) as client:
            create_topic(client, "durable", configs={"retention.ms": "1000"})
            assert _incremental(client, "durable", [("cleanup.policy", APPEND, "compact"),
                                                    ("retention.min.timestamp", SET, "1700000000000")]).error_code == 0
            assert _alter(client, "other", [], 2).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        broker.restart(stop)
        with WireClient(broker.port) as client:
            values = _values(client, "durable")
            assert (values["retention.ms"], values["cleanup.policy"], values["retention.min.timestamp"]) == \
                ("1000", "delete,compact", "1700000000000")
            assert _configs(client, "durable")["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG


# --- real clients ---------------------------------------------------------------------------------


def test_kafka_python_admin(broker):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        created = admin.create_topics({"kp-topic": {"num_partitions": 2, "configs": {"retention.ms": "90000"}}})
        assert created["topics"][0]["error_code"] == 0
        resource = ConfigResource(ConfigResourceType.TOPIC, "kp-topic")
        described = admin.describe_configs([resource], config_filter="all")["topic"]["kp-topic"]
        assert described["retention.ms"]["value"] == "90000"
        assert described["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert described["segment.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"
        # the default path: DescribeConfigs to check the keys, then IncrementalAlterConfigs
        result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-topic",
                                                     configs={"retention.min.timestamp": "1700000000000"})])
        assert result == {"topic": {"kp-topic": "OK"}}
        # the legacy AlterConfigs path fills in the other modified keys first
        result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-topic",
                                                     configs={"max.message.bytes": "2000000"})], incremental=False)
        assert result == {"topic": {"kp-topic": "OK"}}
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-topic")])["topic"]["kp-topic"]
        assert {k: v["value"] for k, v in modified.items()} == {
            "retention.ms": "90000", "retention.min.timestamp": "1700000000000", "max.message.bytes": "2000000"}
        with pytest.raises(ValueError, match="Unrecognized configs"):
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-topic", configs={"bogus": "1"})])
        admin.create_partitions({"kp-topic": 4})
        assert len(admin.describe_topics(["kp-topic"])[0]["partitions"]) == 4
        deleted = admin.delete_topics(["kp-topic"])
        assert deleted["topics"][0]["error_code"] == 0
        assert "kp-topic" not in admin.list_topics()
    finally:
        admin.close()


def test_confluent_kafka_admin(broker):
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("ck-topic", num_partitions=1, replication_factor=1)],
                                      request_timeout=10).values():
        future.result(timeout=15)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "ck-topic", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)
    [described] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "ck-topic")]).values()
    entries = described.result(timeout=15)
    assert entries["cleanup.policy"].value == "delete,compact"
    assert entries["retention.ms"].value == "123456"
    assert entries["retention.ms"].source == ck.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["segment.bytes"].source == ck.admin.ConfigSource.STATIC_BROKER_CONFIG.value
    bad = ConfigResource(ConfigResource.Type.TOPIC, "ck-topic", incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)])
    with pytest.raises(ck.KafkaException) as info:
        for future in admin.incremental_alter_configs([bad]).values():
            future.result(timeout=15)
    assert info.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
    for future in admin.delete_topics(["ck-topic"], request_timeout=10).values():
        future.result(timeout=15)


async def test_aiokafka_admin_alters_with_the_legacy_api(broker):
    """aiokafka's only alter call is AlterConfigs (33): it replaces the override set."""
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        created = await admin.create_topics([NewTopic("aio-topic", 2, 1, topic_configs={"retention.ms": "5000"})])
        assert created.topic_errors[0][1] == 0
        [altered] = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "aio-topic",
                                                              {"retention.bytes": "4096"})])
        assert altered.resources[0][0] == 0
        [described] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "aio-topic")])
        entries = {c[0]: c for c in described.resources[0][4]}
        assert entries["retention.bytes"][1] == "4096" and entries["retention.bytes"][3] == 1
        assert entries["retention.ms"][3] == ConfigSource.DEFAULT_CONFIG  # replaced: back to the default
        await admin.create_partitions({"aio-topic": NewPartitions(3)})
        deleted = await admin.delete_topics(["aio-topic"])
        assert deleted.topic_error_codes[0][1] == 0
    finally:
        await admin.close()
