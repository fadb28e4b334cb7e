"""Broker configuration: Kafka names and defaults, and start-up errors that name the property."""

import subprocess
import sys

import pytest

from broker.config import ConfigError, load_config, parse_properties


def test_defaults_are_kafkas():
    config = load_config()
    assert str(config.listeners[0]) == "PLAINTEXT://127.0.0.1:9092"
    assert config.advertised_listener == config.listeners[0]
    assert config.num_partitions == 1 and config.auto_create_topics_enable
    assert config.message_max_bytes == 1048588 and config.socket_request_max_bytes == 104857600
    assert config.topic_defaults.retention_ms == 7 * 24 * 3600 * 1000
    assert config.topic_defaults.cleanup_policy == ("delete",)


def test_properties_file_and_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\nlog.retention.hours=2\nnum.partitions : 3\n! also a comment\n")
    config = load_config(path, ["num.partitions=5", "log.retention.min.timestamp=1700000000000"])
    assert config.num_partitions == 5
    assert config.topic_defaults.retention_ms == 2 * 3600 * 1000
    assert config.topic_defaults.retention_min_timestamp == 1700000000000


@pytest.mark.parametrize("override, named", [
    ("node.id=abc", "node.id"),
    ("listeners=localhost:9092", "listeners"),
    ("auto.create.topics.enable=maybe", "auto.create.topics.enable"),
    ("num.partitions=0", "num.partitions"),
    ("log.dirs=a,b", "log.dirs"),
    ("log.cleanup.policy=shred", "cleanup.policy"),
    ("advertised.listeners=PLAINTEXT://0.0.0.0:9092", "advertised.listeners"),
    ("novalue", "novalue"),
])
def test_bad_settings_name_the_property(override, named):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert named in str(info.value)


def test_unparseable_properties_line():
    with pytest.raises(ConfigError, match="line 2"):
        parse_properties("a=1\n=oops\n")


def test_broker_refuses_to_start_with_a_bad_setting(tmp_path):
    out = subprocess.run([sys.executable, "-m", "broker", "--override", "message.max.bytes=lots",
                          "--override", f"log.dirs={tmp_path}"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "message.max.bytes" in out.stderr and "not an integer" in out.stderr


# Security Ebb does not serve yet must stop start-up, never give an open broker that looks secured.
@pytest.mark.parametrize("overrides, named", [
    (["listeners=SASL_PLAINTEXT://127.0.0.1:9092"], "SASL_PLAINTEXT"),
    (["listeners=SSL://127.0.0.1:9093"], "SSL"),
    (["listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093"], "SASL_SSL"),
    (["listeners=CLIENT://127.0.0.1:9092", "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT"], "CLIENT"),
    (["listeners=CLIENT://127.0.0.1:9092"], "listener.security.protocol.map"),
    (["listener.security.protocol.map=PLAINTEXT:KERBEROS"], "listener.security.protocol.map"),
    (["advertised.listeners=SSL://localhost:9092"], "advertised.listeners"),
    (["sasl.enabled.mechanisms=PLAIN"], "sasl.enabled.mechanisms"),
    (["authorizer.class.name=kafka.security.authorizer.AclAuthorizer"], "authorizer.class.name"),
    (["super.users=User:admin"], "super.users"),
    (["allow.everyone.if.no.acl.found=false"], "allow.everyone.if.no.acl.found"),
    (["ssl.keystore.location=/etc/kafka/keystore.jks"], "ssl.keystore.location"),
    (["listener.name.plaintext.plain.sasl.jaas.config=x"], "listener.name.plaintext.plain.sasl.jaas.config"),
    (["security.inter.broker.protocol=SASL_SSL"], "security.inter.broker.protocol"),
    (["inter.broker.listener.name=INTERNAL"], "inter.broker.listener.name"),
    (["listeners=A://127.0.0.1:9092,B://127.0.0.1:9093", "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT",
      "inter.broker.listener.name=B"], "inter.broker.listener.name"),
    (["max.connections.per.ip=10"], "max.connections.per.ip"),
])
def test_security_ebb_does_not_serve_stops_start_up(overrides, named):
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert named in str(info.value)


def test_plaintext_listeners_under_any_name_are_served():
    config = load_config(None, [
        "listeners=REPLICATION://127.0.0.1:9092,CLIENT://127.0.0.1:9093",
        "listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
        "inter.broker.listener.name=REPLICATION", "security.inter.broker.protocol=PLAINTEXT",
        "authorizer.class.name=",
    ])
    assert [listener.name for listener in config.listeners] == ["REPLICATION", "CLIENT"]


def test_broker_asked_for_sasl_refuses_to_start(tmp_path):
    # The case a new user hit: SASL asked for, an open broker served.
    out = subprocess.run([sys.executable, "-m", "broker", "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                          "--override", "sasl.enabled.mechanisms=PLAIN",
                          "--override", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                          "--override", f"log.dirs={tmp_path}"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "authorizer.class.name: not supported" in out.stderr
    assert not any(tmp_path.iterdir())  # refused before touching the log dir
