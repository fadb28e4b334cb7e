"""Dynamic broker configs on one broker (the embedded store): per-broker and cluster-wide values in
Kafka's precedence, reported with their synonyms, in force on the topics at once and after a
restart; what cannot change at runtime, or a bad value, refused by name."""

import json
import signal
import time

import pytest

from protocol.enums import ConfigSource
from protocol.errors import ErrorCode
from tests.broker.test_configs import (
    APPEND,
    BROKER,
    DELETE,
    SET,
    _alter,
    _configs,
    _earliest,
    _incremental,
    _produce,
)
from tests.broker.wire_client import WireClient, create_topic
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

GROUP = 32
DYNAMIC, DEFAULT_DYNAMIC, STATIC, DEFAULT = (ConfigSource.DYNAMIC_BROKER_CONFIG,
                                             ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                             ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG)


@pytest.fixture(scope="module")
def broker_overrides():
    # Ebb-only: a segment per batch, below Kafka's 1 MiB minimum (the retention test)
    return {"log.retention.hours": "48", "ebb.testing.small.segments.enable": "true",
            "log.cleaner.backoff.ms": "100"}


@pytest.fixture(scope="module")
def client(broker):
    with WireClient(broker.port) as c:
        yield c


def _synonyms(entry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def test_precedence_per_broker_over_cluster_default_over_static(client):
    create_topic(client, "layered")
    assert _incremental(client, "", [("log.retention.ms", SET, "3600000")], resource_type=BROKER).error_code == 0
    topic = _configs(client, "layered", synonyms=True)["retention.ms"]
    assert (topic.value, topic.config_source) == ("3600000", DEFAULT_DYNAMIC)
    assert _synonyms(topic) == [("log.retention.ms", "3600000", DEFAULT_DYNAMIC),
                                ("log.retention.hours", "48", STATIC), ("log.retention.hours", "168", DEFAULT)]

    assert _incremental(client, "1", [("log.retention.ms", SET, "7200000")], resource_type=BROKER).error_code == 0
    own = _configs(client, "1", resource_type=BROKER, synonyms=True)["log.retention.ms"]
    assert (own.value, own.config_source, own.read_only) == ("7200000", DYNAMIC, False)
    assert [s[2] for s in _synonyms(own)] == [DYNAMIC, DEFAULT_DYNAMIC, STATIC, DEFAULT]
    assert _configs(client, "layered")["retention.ms"].value == "7200000"
    # The cluster-wide resource lists only what is set there.
    cluster = _configs(client, "", resource_type=BROKER, synonyms=True)
    assert list(cluster) == ["log.retention.ms"]
    assert _synonyms(cluster["log.retention.ms"]) == [("log.retention.ms", "3600000", DEFAULT_DYNAMIC)]

    assert _incremental(client, "1", [("log.retention.ms", DELETE, None)], resource_type=BROKER).error_code == 0
    assert _configs(client, "layered")["retention.ms"].value == "3600000"
    assert _alter(client, "", [], resource_type=BROKER).error_code == 0  # the legacy call replaces the set
    assert _configs(client, "layered")["retention.ms"].value == str(48 * 3_600_000)
    assert _configs(client, "", resource_type=BROKER) == {}


def test_list_operations_start_from_the_value_in_force(client):
    create_topic(client, "policy")
    result = _incremental(client, "", [("log.cleanup.policy", APPEND, "compact")], resource_type=BROKER)
    assert result.error_code == 0
    assert _configs(client, "policy")["cleanup.policy"].value == "delete,compact"
    assert _incremental(client, "", [("log.cleanup.policy", DELETE, None)], resource_type=BROKER).error_code == 0
    assert _configs(client, "policy")["cleanup.policy"].value == "delete"


@pytest.mark.parametrize("changes, message", [
    ([("log.dirs", "/elsewhere")], "Cannot update these configs dynamically: [log.dirs]"),
    ([("num.partitions", "3"), ("broker.id", "2")],
     "Cannot update these configs dynamically: [broker.id, num.partitions]"),
    ([("no.such.config", "1")], "Cannot update these configs dynamically: [no.such.config]"),
    ([("log.retention.ms", "soon")],
     "Invalid value soon for configuration log.retention.ms: Not a number of type LONG"),
    ([("leader.replication.throttled.rate", "-1")], "Invalid value -1 for configuration "
                                                    "leader.replication.throttled.rate: Value must be at least 0"),
    ([("log.cleaner.io.max.bytes.per.second", "0")], "Invalid value 0 for configuration "
                                                     "log.cleaner.io.max.bytes.per.second: Value must be above 0"),
    ([("group.share.assignment.interval.ms", "-1")], "Invalid value -1 for configuration "
                                                     "group.share.assignment.interval.ms: Value must be at least 0"),
    ([("group.consumer.assignment.interval.ms", "15001")],
     "group.consumer.assignment.interval.ms must be less than or equal to group.consumer.max.assignment.interval.ms"),
    ([("group.consumer.max.assignment.interval.ms", "20000")],
     "Cannot update these configs dynamically: [group.consumer.max.assignment.interval.ms]"),
    # Kafka takes these for listeners it adds later (or after a restart); Ebb adds none at runtime.
    ([("sasl.enabled.mechanisms", "PLAIN")], "Cannot update these configs dynamically: [sasl.enabled.mechanisms]"),
])
@pytest.mark.parametrize("entity", ["1", ""])
def test_refused_by_name_and_nothing_stored(client, changes, message, entity):
    for result in (_incremental(client, entity, [(k, SET, v) for k, v in changes], resource_type=BROKER),
                   _alter(client, entity, changes, resource_type=BROKER)):
        assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, message)
    assert not {k for k, _ in changes} & set(_configs(client, "", resource_type=BROKER))
    own = _configs(client, "1", resource_type=BROKER)
    assert all(own[k].config_source != DYNAMIC for k, _ in changes if k in own)


def test_group_assignment_intervals_are_dynamic_cluster_wide(client):
    """Kafka 4.3 lets these change at runtime; Ebb stores and reports them (the consumer one paces KIP-848
    groups: test_consumer_group_restart.py), and a group's config lists the broker's value behind its own."""
    result = _incremental(client, "", [("group.consumer.assignment.interval.ms", SET, "2000")], resource_type=BROKER)
    assert result.error_code == 0, result.error_message
    assert _incremental(client, "1", [("group.streams.assignment.interval.ms", SET, "3000")],
                        resource_type=BROKER).error_code == 0
    own = _configs(client, "1", resource_type=BROKER, synonyms=True)
    consumer, streams = own["group.consumer.assignment.interval.ms"], own["group.streams.assignment.interval.ms"]
    assert (consumer.value, consumer.config_source, consumer.read_only) == ("2000", DEFAULT_DYNAMIC, False)
    assert _synonyms(consumer) == [("group.consumer.assignment.interval.ms", "2000", DEFAULT_DYNAMIC),
                                   ("group.consumer.assignment.interval.ms", "1000", DEFAULT)]
    assert (streams.value, streams.config_source) == ("3000", DYNAMIC)
    group = _configs(client, "paced", resource_type=GROUP, synonyms=True)["consumer.assignment.interval.ms"]
    assert _synonyms(group)[0] == ("group.consumer.assignment.interval.ms", "2000", DEFAULT_DYNAMIC)
    assert _incremental(client, "", [("group.consumer.assignment.interval.ms", DELETE, None)],
                        resource_type=BROKER).error_code == 0
    assert _incremental(client, "1", [("group.streams.assignment.interval.ms", DELETE, None)],
                        resource_type=BROKER).error_code == 0
    assert _configs(client, "1", resource_type=BROKER)["group.consumer.assignment.interval.ms"].value == "1000"


@pytest.mark.parametrize("entity, message", [
    ("1", "Cannot update these configs dynamically: [listener.name.plaintext.plain.sasl.jaas.config] (of a "
          "listener, only its TLS key material changes at runtime; set the others in server.properties)"),
    ("", "Cannot update these configs at default cluster level, broker id must be specified: "
         "[listener.name.plaintext.plain.sasl.jaas.config]"),
])
def test_a_listeners_sasl_settings_are_refused_by_name(client, entity, message):
    result = _incremental(client, entity, [("listener.name.plaintext.plain.sasl.jaas.config", SET, "x")],
                          resource_type=BROKER)
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, message)


def test_the_cleaner_io_rate_is_in_force_from_the_next_round(client, broker):
    """Kafka's LogCleaner takes log.cleaner.io.max.bytes.per.second at runtime; a round reads the rate in
    force when it starts (and logs it: a round too small to be held back shows nothing else)."""
    assert _incremental(client, "", [("log.cleaner.io.max.bytes.per.second", SET, "250000")],
                        resource_type=BROKER).error_code == 0
    rate = _configs(client, "1", resource_type=BROKER)["log.cleaner.io.max.bytes.per.second"]
    assert (rate.value, rate.config_source) == ("250000.0", DEFAULT_DYNAMIC)
    create_topic(client, "throttled-compacted", configs={"segment.bytes": "100", "cleanup.policy": "compact"})
    for _ in range(3):
        _produce(client, "throttled-compacted", int(time.time() * 1000))

    def round_at_the_rate() -> bool:
        events = [json.loads(line) for line in broker.log_path.read_text(errors="replace").splitlines()
                  if line.startswith("{") and "throttled-compacted" in line]
        return any(e.get("event") == "cleaning log" and e.get("io_max_bytes_per_second") == 250_000 for e in events)
    wait_for(round_at_the_rate, what="a cleaning round at the dynamic rate")
    assert _incremental(client, "", [("log.cleaner.io.max.bytes.per.second", DELETE, None)],
                        resource_type=BROKER).error_code == 0
    assert _configs(client, "1", resource_type=BROKER)["log.cleaner.io.max.bytes.per.second"].config_source == DEFAULT


def test_validate_only_changes_nothing(client):
    result = _incremental(client, "", [("message.max.bytes", SET, "2000000")], resource_type=BROKER,
                          validate_only=True)
    assert result.error_code == 0
    assert "message.max.bytes" not in _configs(client, "", resource_type=BROKER)


def test_cluster_default_retention_trims_at_once(client):
    # tiny segments: each batch gets its own, so retention can drop the old ones and keep the new
    create_topic(client, "trimmed", configs={"segment.bytes": "100"})
    now = int(time.time() * 1000)
    for timestamp in (now - 3_600_000, now - 3_000_000, now):
        _produce(client, "trimmed", timestamp)
    assert _earliest(client, "trimmed") == 0
    assert _incremental(client, "", [("log.retention.ms", SET, "600000")], resource_type=BROKER).error_code == 0
    assert _earliest(client, "trimmed") == 2  # answered after the retention pass: no wait
    assert _incremental(client, "", [("log.retention.ms", DELETE, None)], resource_type=BROKER).error_code == 0


def test_dynamic_configs_survive_a_restart(tmp_path):
    with BrokerProcess(tmp_path) as broker:
        with WireClient(broker.port) as client:
            create_topic(client, "kept")
            assert _incremental(client, "", [("message.max.bytes", SET, "2000000")],
                                resource_type=BROKER).error_code == 0
            assert _incremental(client, "1", [("log.segment.bytes", SET, "2097152")],
                                resource_type=BROKER).error_code == 0
        broker.restart(signal.SIGKILL)
        with WireClient(broker.port) as client:
            configs = _configs(client, "kept")
            assert (configs["max.message.bytes"].value, configs["max.message.bytes"].config_source) == \
                ("2000000", DEFAULT_DYNAMIC)
            assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == ("2097152", DYNAMIC)
