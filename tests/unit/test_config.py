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
    ("transactional.id.expiration.ms=0", "transactional.id.expiration.ms"),  # Kafka's INT, at least 1
    ("transactional.id.expiration.ms=2147483648", "transactional.id.expiration.ms"),
    ("transaction.remove.expired.transaction.cleanup.interval.ms=0",
     "transaction.remove.expired.transaction.cleanup.interval.ms"),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms=-1",
     "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
    ("log.cleaner.enable=yes", "log.cleaner.enable"),  # Kafka's ConfigDef: true or false only
    ("log.start.offset.checkpoint.sync=1", "log.start.offset.checkpoint.sync"),
    ("log.cleaner.threads=two", "log.cleaner.threads"),
    ("leader.replication.throttled.rate=-1", "leader.replication.throttled.rate"),  # Kafka's LONG, at least 0
    ("follower.replication.throttled.rate=fast", "follower.replication.throttled.rate"),
    ("replication.quota.window.num=0", "replication.quota.window.num"),
    ("replication.quota.window.size.seconds=0", "replication.quota.window.size.seconds"),
    ("socket.listen.backlog.size=0", "socket.listen.backlog.size"),  # Kafka's atLeast(1)
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


# Security Ebb does not serve must stop start-up, never give an open broker that looks secured.
@pytest.mark.parametrize("overrides, named", [
    (["listeners=SASL_PLAINTEXT://127.0.0.1:9092"], "GSSAPI"),  # Kafka's default mechanism
    (["listeners=SSL://127.0.0.1:9093"], "ssl.keystore.location"),  # TLS without a certificate
    (["listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093"], "GSSAPI"),
    (["listeners=CLIENT://127.0.0.1:9092", "listener.security.protocol.map=CLIENT:SSL",
      "listener.name.client.ssl.keystore.type=PKCS12"], "listener.name.client.ssl.keystore.type"),
    (["listeners=CLIENT://127.0.0.1:9092"], "listener.security.protocol.map"),
    (["listener.security.protocol.map=PLAINTEXT:KERBEROS"], "listener.security.protocol.map"),
    (["advertised.listeners=SSL://localhost:9092"], "advertised.listeners"),
    # OAUTHBEARER's validator needs its JAAS entry, as Kafka's does (exactly one), with a clock skew it can use
    (["listeners=SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms=OAUTHBEARER"],
     "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms=OAUTHBEARER",
      "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
      "OAuthBearerLoginModule required unsecuredValidatorAllowableClockSkewMs=-5;"], "must not be negative"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms=OAUTHBEARER",
      "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
      'OAuthBearerLoginModule required unsecuredValidatorAllowableClockSkewMs="1_000";'],
     'unsecuredValidatorAllowableClockSkewMs: For input string: "1_000"'),  # Integer.parseInt's refusal
    (["listeners=SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms=OAUTHBEARER",
      "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
      "OAuthBearerLoginModule required;", "sasl.oauthbearer.jwks.endpoint.url=https://idp/keys"],
     "sasl.oauthbearer.jwks.endpoint.url"),  # a secured validator's settings: not served
    (["listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms=OAUTHBEARER",
      "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
      "OAuthBearerLoginModule required;", "inter.broker.listener.name=SASL_PLAINTEXT",
      "sasl.mechanism.inter.broker.protocol=OAUTHBEARER", "zookeeper.connect=127.0.0.1:2181"],
     "sasl.mechanism.inter.broker.protocol"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms=PLAIN"],
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms=PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config=PlainLoginModule required"],
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    (["sasl.login.class=x"], "sasl.login.class"),
    (["authorizer.class.name=com.example.HomeMadeAuthorizer"], "authorizer.class.name"),
    (["authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "super.users=admin"], "super.users"),
    (["super.users=User:admin"], "super.users"),
    (["allow.everyone.if.no.acl.found=false"], "allow.everyone.if.no.acl.found"),
    (["ssl.keystore.location=/etc/kafka/keystore.jks"], "ssl.keystore.location"),
    (["listener.name.plaintext.plain.sasl.jaas.config=x"], "listener.name.plaintext.plain.sasl.jaas.config"),
    (["security.inter.broker.protocol=SASL_SSL"], "security.inter.broker.protocol"),
    (["inter.broker.listener.name=INTERNAL"], "inter.broker.listener.name"),
    (["listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms=SCRAM-SHA-256",
      "inter.broker.listener.name=SASL_PLAINTEXT", "zookeeper.connect=127.0.0.1:2181"],
     "sasl.mechanism.inter.broker.protocol"),  # Kafka's default GSSAPI
    (["listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms=SCRAM-SHA-256",
      "inter.broker.listener.name=SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
      "zookeeper.connect=127.0.0.1:2181"], "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"),
    (["listeners=A://127.0.0.1:9092,A://127.0.0.1:9093", "listener.security.protocol.map=A:PLAINTEXT"], "listeners"),
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
                          "--override", "sasl.enabled.mechanisms=GSSAPI",
                          "--override", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                          "--override", f"log.dirs={tmp_path}"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "sasl.enabled.mechanisms: GSSAPI" in out.stderr
    assert not any(tmp_path.iterdir())  # refused before touching the log dir


def test_sasl_listeners_beside_plaintext_ones():
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    config = load_config(None, [
        "listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
        "advertised.listeners=SASL_PLAINTEXT://broker.example:19093",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
    ])
    assert config.listener_protocols == {"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT"}
    assert [str(item) for item in config.advertised_listeners] == [
        "PLAINTEXT://127.0.0.1:9092", "SASL_PLAINTEXT://broker.example:19093"]
    assert str(config.advertised_listener) == "PLAINTEXT://127.0.0.1:9092"  # inter-broker: PLAINTEXT by default
    sasl = config.sasl_listeners["SASL_PLAINTEXT"]
    assert sasl.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert sasl.plain_users == {"admin": "admin-secret", "alice": "alice-secret"}


def test_erasure_bound_is_a_topic_config_with_a_broker_default():
    from broker.dynamic_config import DynamicConfigError, validate
    from broker.topic_configs import TOPIC_CONFIGS, InvalidConfig

    assert load_config().topic_defaults.erasure_max_delay_ms == -1  # off unless asked for
    config = load_config(None, ["log.erasure.max.delay.ms=60000"])
    assert config.topic_defaults.erasure_max_delay_ms == 60000 and config.topic_defaults.erasure_enabled
    definition = TOPIC_CONFIGS["erasure.max.delay.ms"]
    assert definition.broker_synonyms == ("log.erasure.max.delay.ms",) and definition.effective
    assert definition.parse("0") == 0
    with pytest.raises(InvalidConfig, match="Value must be at least -1"):
        definition.parse("-2")
    assert validate({"log.erasure.max.delay.ms": " 5000 "}) == {"log.erasure.max.delay.ms": "5000"}
    with pytest.raises(DynamicConfigError):
        validate({"log.erasure.max.delay.ms": "soon"})
