"""kafka-configs (kafka.admin.ConfigCommand 4.3.1) rotates an SSL listener's keystore on a running Ebb
broker as an operator runs it: the new certificate reaches new connections, the key password is
listed as sensitive, and a keystore with another subject is refused with the tool's error exit."""

from __future__ import annotations

import socket
import ssl

import pytest

from tests.security.certs import SSL_KEY_PASSWORD as PASSWORD
from tests.security.certs import SSL_KEYSTORE_LOCATION as LOCATION
from tests.security.certs import CertificateAuthority, rotation_pki, ssl_listener_broker

CONFIGS = "kafka.admin.ConfigCommand"
BROKER_1 = ("--entity-type", "brokers", "--entity-name", "1")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return rotation_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):
    with ssl_listener_broker(tmp_path_factory.mktemp("broker"), pki.first.combined) as process:
        yield process


def _served(port: int, ca: CertificateAuthority) -> bytes:
    context = ssl.create_default_context(cafile=str(ca.pem.cert))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        return tls.getpeercert(binary_form=True)


def test_kafka_configs_rotates_a_listener_keystore(java, broker, pki):
    second = pki.second.combined
    altered = java.tool(broker.bootstrap, CONFIGS, *BROKER_1, "--alter", "--add-config",
                        f"{LOCATION}={second},{PASSWORD}=new-secret")
    assert altered.returncode == 0, altered.stderr[-2000:]
    assert altered.lines == ["Completed updating config for broker 1."]
    assert _served(broker.ssl_port, pki) == ssl.PEM_cert_to_DER_cert(pki.second.cert.read_text())

    described = java.tool(broker.bootstrap, CONFIGS, *BROKER_1, "--describe")
    assert described.lines == [
        "Dynamic configs for broker 1 are:",
        f"  {PASSWORD}=null sensitive=true synonyms={{DYNAMIC_BROKER_CONFIG:{PASSWORD}=null}}",
        f"  {LOCATION}={second} sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:{LOCATION}={second}, "
        f"STATIC_BROKER_CONFIG:ssl.keystore.location={pki.first.combined}}}"]

    refused = java.tool(broker.bootstrap, CONFIGS, *BROKER_1, "--alter", "--add-config",
                        f"{LOCATION}={pki.other.combined}")
    assert refused.returncode == 1
    assert "InvalidRequestException: Invalid dynamic configuration" in refused.stdout + refused.stderr
    assert _served(broker.ssl_port, pki) == ssl.PEM_cert_to_DER_cert(pki.second.cert.read_text())
