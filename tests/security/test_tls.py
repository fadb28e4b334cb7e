"""TLS listeners (SSL and SASL_SSL) from PEM files with the standard ssl module: four real clients over
SSL, SCRAM over SASL_SSL, client certificates as principals, and settings that cannot be served."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.security.certs import CertificateAuthority
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.polling import wait_for
from tests.support.scram_users import create_scram_user

pytestmark = pytest.mark.timeout(120)
JS_DIR = Path(__file__).parents[1] / "conformance" / "js"


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    ca.server = ca.issue("server", server=True, password=b"key-secret", O="Ebb tests", CN="localhost")
    ca.client = ca.issue("alice", server=False, O="Example", OU="eng", CN="alice")
    return ca


@pytest.fixture(scope="module")
def broker(tmp_path_factory, ca):
    process = BrokerProcess(tmp_path_factory.mktemp("tls"))
    process.ssl_port, process.sasl_ssl_port, process.mtls_port = free_port(), free_port(), free_port()
    process.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SSL://127.0.0.1:{process.ssl_port},"
                     f"SASL_SSL://127.0.0.1:{process.sasl_ssl_port},MTLS://127.0.0.1:{process.mtls_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(ca.server.combined),
        "ssl.key.password": "key-secret",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.location": str(ca.pem.cert),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
    })
    with process:
        create_scram_user(process.bootstrap, "bob", "bob-secret")
        yield process


def _deliver(config: dict) -> list:
    delivered = []
    producer = Producer({**config, "message.timeout.ms": 15000})
    producer.produce("tls-topic", b"v", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(20)
    return delivered


def test_confluent_kafka_over_ssl(broker, ca):
    assert _deliver({"bootstrap.servers": f"127.0.0.1:{broker.ssl_port}", "security.protocol": "SSL",
                     "ssl.ca.location": str(ca.pem.cert)}) == [None]


def test_confluent_kafka_rejects_a_broker_it_does_not_trust(broker, tmp_path):
    other = CertificateAuthority(tmp_path, "Some other CA")
    errors = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.ssl_port}", "security.protocol": "SSL",
                         "ssl.ca.location": str(other.pem.cert), "error_cb": errors.append})
    wait_for(lambda: producer.poll(0.1) is not None and bool(errors), timeout_s=10, what="a TLS error")
    assert "certificate verify failed" in errors[0].str()


def test_kafka_python_over_ssl(broker, ca):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.ssl_port}", security_protocol="SSL",
                             ssl_cafile=str(ca.pem.cert))
    assert producer.send("tls-topic", b"v").get(timeout=20).offset >= 0
    producer.close()


def test_aiokafka_over_sasl_ssl_with_scram(broker, ca):
    from aiokafka import AIOKafkaProducer

    async def produce():
        context = ssl.create_default_context(cafile=str(ca.pem.cert))
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.sasl_ssl_port}",
                                    security_protocol="SASL_SSL", ssl_context=context,
                                    sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                                    sasl_plain_password="bob-secret")
        await producer.start()
        try:
            return await producer.send_and_wait("tls-topic", b"v")
        finally:
            await producer.stop()

    assert asyncio.run(produce()).offset >= 0
    assert '"principal": "User:bob"' in broker.log_text()


def test_kafkajs_over_sasl_ssl(broker, ca):
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "kafkajs").exists():
        pytest.fail("node and kafkajs are needed: `make test` installs them")
    out = subprocess.run([node, "sasl.js", f"localhost:{broker.sasl_ssl_port}", "SCRAM-SHA-512", "bob", "bob-secret",
                          "tls-js"], capture_output=True, text=True, timeout=30, cwd=JS_DIR,
                         env={"PATH": "/usr/bin:/bin", "NODE_EXTRA_CA_CERTS": str(ca.pem.cert), "EBB_TLS": "1"})
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ok"], (result, out.stderr[-2000:])
    assert result["brokers"] == [f"127.0.0.1:{broker.sasl_ssl_port}"]


def test_client_certificate_names_the_principal(broker, ca):
    config = {"bootstrap.servers": f"127.0.0.1:{broker.mtls_port}", "security.protocol": "SSL",
              "ssl.ca.location": str(ca.pem.cert)}
    assert _deliver({**config, "ssl.certificate.location": str(ca.client.cert),
                     "ssl.key.location": str(ca.client.key)}) == [None]
    assert '"principal": "User:CN=alice,OU=eng,O=Example"' in broker.log_text()


def test_required_client_certificate_refuses_a_client_without_one(broker, ca):
    context = ssl.create_default_context(cafile=str(ca.pem.cert))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        import socket

        with socket.create_connection(("127.0.0.1", broker.mtls_port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(b"\x00\x00\x00\x00")
                if not tls.recv(1):  # TLS 1.3 reports the refused certificate on the first read
                    raise ConnectionError("closed")


@pytest.mark.parametrize("overrides, named", [
    ({"listeners": "SSL://127.0.0.1:0"}, "ssl.keystore.location"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/nonexistent.pem"}, "ssl.keystore.location"),
    ({"listeners": "SSL://127.0.0.1:0", "ssl.enabled.protocols": "TLSv1"}, "ssl.enabled.protocols"),
    ({"ssl.keystore.location": "/etc/kafka/server.pem"}, "ssl.keystore.location"),  # no TLS listener uses it
    ({"listeners": "SSL://127.0.0.1:0", "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "ssl.cipher.suites"),
])
def test_tls_settings_that_cannot_be_served_stop_start_up(tmp_path, ca, overrides, named):
    args = [sys.executable, "-m", "broker", "--override", f"log.dirs={tmp_path}"]
    if "ssl.keystore.type" in overrides or "ssl.enabled.protocols" in overrides:
        overrides = {"ssl.keystore.location": str(ca.server.combined), "ssl.key.password": "key-secret",
                     **overrides}
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out.stderr
    assert named in out.stderr


def test_confluent_kafka_and_kafka_python_over_sasl_ssl(broker, ca):
    from kafka import KafkaProducer

    assert _deliver({"bootstrap.servers": f"127.0.0.1:{broker.sasl_ssl_port}", "security.protocol": "SASL_SSL",
                     "ssl.ca.location": str(ca.pem.cert), "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": "bob", "sasl.password": "bob-secret"}) == [None]
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.sasl_ssl_port}", security_protocol="SASL_SSL",
                             ssl_cafile=str(ca.pem.cert), sasl_mechanism="SCRAM-SHA-512",
                             sasl_plain_username="bob", sasl_plain_password="bob-secret")
    assert producer.send("tls-topic", b"v").get(timeout=20).offset >= 0
    producer.close()
