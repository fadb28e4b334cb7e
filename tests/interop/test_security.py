"""Kafka's own tools against Ebb's SASL_SSL listener, as an operator secures a Kafka cluster:
kafka-configs creates a SCRAM user (AlterUserScramCredentials) and lists it, then kafka-topics,
kafka-delete-records and kafka-get-offsets authenticate with SCRAM-SHA-512 over TLS through a
--command-config file, and a wrong password is refused."""

from __future__ import annotations

import json

import pytest

from tests.security.certs import CertificateAuthority
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.ebb_cli import ebb

CONFIGS = "kafka.admin.ConfigCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("secured")
    ca = CertificateAuthority(directory)
    server = ca.issue("server", server=True, CN="localhost")
    process = BrokerProcess(directory / "broker")
    process.sasl_ssl_port = free_port()
    process.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SASL_SSL://127.0.0.1:{process.sasl_ssl_port}",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.ssl.keystore.location": str(server.combined),
    })

    def client_config(password: str):
        path = directory / f"client-{password}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="alice" password="{password}";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={ca.pem.cert}\n")
        return str(path)

    process.client_config = client_config
    with process:
        yield process


def test_kafka_configs_creates_and_lists_a_scram_user(java, secured):
    created = java.tool(secured.bootstrap, CONFIGS, "--alter", "--entity-type", "users", "--entity-name", "alice",
                        "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]")
    assert created.returncode == 0, created.stderr[-3000:]
    assert "Completed updating config for user alice." in created.stdout
    described = java.tool(secured.bootstrap, CONFIGS, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert described.returncode == 0, described.stderr[-3000:]
    assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192" in described.stdout


def test_kafka_tools_over_sasl_ssl(java, secured, tmp_path):
    bootstrap, config = f"localhost:{secured.sasl_ssl_port}", secured.client_config("alice-secret")
    created = java.tool(bootstrap, TOPICS, "--command-config", config, "--create", "--topic", "secured",
                        "--partitions", "2")
    assert created.returncode == 0, created.stderr[-3000:]
    filled = java.run(PRODUCER_PERF, "--topic", "secured", "--num-records", "20", "--record-size", "10",
                      "--throughput", "-1", "--producer.config", config, "--producer-props",
                      f"bootstrap.servers={bootstrap}", "partitioner.class="
                      "org.apache.kafka.clients.producer.RoundRobinPartitioner")
    assert filled.returncode == 0, filled.stderr[-3000:]
    offsets = tmp_path / "offsets.json"
    offsets.write_text('{"partitions": [{"topic": "secured", "partition": 0, "offset": 3}], "version": 1}')
    deleted = java.tool(bootstrap, DELETE_RECORDS, "--command-config", config, "--offset-json-file", str(offsets))
    assert deleted.returncode == 0, deleted.stderr[-3000:]
    assert "partition: secured-0\tlow_watermark: 3" in deleted.stdout
    earliest = java.tool(bootstrap, GET_OFFSETS, "--command-config", config, "--topic", "secured", "--time", "-2")
    assert earliest.returncode == 0 and "secured:0:3" in earliest.stdout.split()


def test_ebb_takes_the_same_command_config(java, secured):
    """The properties file Kafka's tools use works for ebb's own commands too (client/security_settings.py)."""
    bootstrap, config = f"localhost:{secured.sasl_ssl_port}", secured.client_config("alice-secret")
    created = ebb("topics", "create", "--bootstrap-server", bootstrap, "--command-config", config,
                  "--topic", "secured-ebb", "--partitions", "1")
    assert created.returncode == 0, created.stderr[-3000:]
    filled = java.run(PRODUCER_PERF, "--topic", "secured-ebb", "--num-records", "10", "--record-size", "10",
                      "--throughput", "-1", "--producer.config", config, "--producer-props",
                      f"bootstrap.servers={bootstrap}")
    assert filled.returncode == 0, filled.stderr[-3000:]
    deleted = ebb("delete-records", "--bootstrap-server", bootstrap, "--command-config", config, "--output", "json",
                  "--topic", "secured-ebb", "--before-offset", "4")
    assert deleted.returncode == 0, deleted.stderr[-3000:]
    assert json.loads(deleted.stdout)["partitions"][0]["low_watermark"] == 4
    earliest = java.tool(bootstrap, GET_OFFSETS, "--command-config", config, "--topic", "secured-ebb", "--time", "-2")
    assert earliest.returncode == 0 and "secured-ebb:0:4" in earliest.stdout.split()
    refused = ebb("topics", "list", "--bootstrap-server", bootstrap, "--command-config",
                  secured.client_config("wrong"))
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
           "SCRAM-SHA-512" in refused.stderr


def test_a_wrong_password_is_refused(java, secured):
    refused = java.tool(f"localhost:{secured.sasl_ssl_port}", TOPICS, "--command-config",
                        secured.client_config("wrong"), "--list")
    assert refused.returncode != 0
    assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
           "SCRAM-SHA-512" in refused.stderr + refused.stdout
