"""Dynamic listener TLS settings and the other listener and group settings KIP-226 names, against Kafka
4.3.1: both brokers start with an SSL listener on a PEM keystore; its keystore is rotated per broker
(`listener.name.ssl.ssl.keystore.location` and its key password) and described (the password null and
sensitive), and what Kafka refuses is compared code for code: a keystore that does not load, another
subject, a certificate without one of the names of the one in force (one with more is taken), a store
key without the listener prefix or at the cluster-wide level, an existing listener's other settings.
The groups' assignment intervals are dynamic in both."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest

from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED
from tests.interop.conftest import TARGET, build
from tests.security.certs import SSL_KEY_PASSWORD as PASSWORD
from tests.security.certs import SSL_KEYSTORE_LOCATION as LOCATION
from tests.security.certs import CertificateAuthority, ssl_listener_broker
from tests.support.broker_process import free_port
from tests.support.kafka_node import KafkaNode
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

BROKER, SET, DELETE = 4, 0, 1
Resource = DescribeConfigsRequest.DescribeConfigsResource
Alter = IncrementalAlterConfigsRequest.AlterConfigsResource
Op = Alter.AlterableConfig

_STORED_ONLY = ("Kafka 4.3 stores it without applying it to the listener it has (its SslFactory reloads key "
                "material only; SASL settings apply to listeners made later); Ebb refuses what it would only store")
ALLOWED_HERE = {
    **ALLOWED,
    ("client auth", "responses[0].error_code"): _STORED_ONLY,
    ("jaas", "responses[0].error_code"): _STORED_ONLY,
    ("expired", "responses[0].error_code"):
        "Kafka's SslFactory catches an expired certificate only on the inter-broker listener (by its "
        "handshakes; this SSL listener is not one); Ebb refuses a certificate outside its validity on any",
    ("sasl mechanisms", "responses[0].error_code"):
        "Kafka stores sasl.enabled.mechanisms for listeners it adds later or after a restart (no effect on "
        "the ones it has); Ebb adds no listener at runtime and refuses what it would only store",
}


def _pkcs8_v1(pem, password: str) -> Path:
    """The key encrypted with PKCS#5 v1 (PBE-SHA1-3DES), which Java's PEM reader decrypts, with its chain."""
    encrypted = subprocess.run(["openssl", "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-in", str(pem.key),
                                "-passout", f"pass:{password}"], capture_output=True, text=True, check=True).stdout
    path = pem.cert.with_suffix(".encrypted.pem")
    path.write_text(encrypted + pem.cert.read_text())
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    ca.first = ca.issue("first", server=True, O="Ebb tests", CN="localhost").combined
    ca.second = _pkcs8_v1(ca.issue("second", server=True, O="Ebb tests", CN="localhost"), "new-secret")
    ca.other = ca.issue("other", server=True, O="Ebb tests", CN="somebody-else").combined
    ca.fewer_names = ca.issue("fewer", server=True, dns_names=(), O="Ebb tests", CN="localhost").combined
    ca.more_names = ca.issue("more", server=True, dns_names=("localhost", "broker.example"), O="Ebb tests",
                             CN="localhost").combined
    ca.expired = ca.issue("expired", server=True, valid_from_days=-3, O="Ebb tests", CN="localhost").combined
    ca.broken = ca.directory / "broken.pem"
    ca.broken.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    return ca


@pytest.fixture(scope="module")
def kafka_peer(tmp_path_factory, pki):
    build()
    node = KafkaNode(tmp_path_factory.mktemp("kafka"), f"{TARGET / 'lib'}/*")
    node.ssl_port = free_port()
    node.properties.update({
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.first),
        "listeners": f"{node.properties['listeners']},SSL://127.0.0.1:{node.ssl_port}",
        "listener.security.protocol.map": f"{node.properties['listener.security.protocol.map']},SSL:SSL",
    })
    with node:
        peer = Peer("kafka", node.port)
        peer.ssl_port = node.ssl_port
        yield peer
        peer.close()


@pytest.fixture(scope="module")
def ebb_peer(tmp_path_factory, pki):
    with ssl_listener_broker(tmp_path_factory.mktemp("ebb"), pki.first) as process:
        peer = Peer("ebb", process.port)
        peer.ssl_port = process.ssl_port
        yield peer
        peer.close()


def _served_certificate(port: int) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        return tls.getpeercert(binary_form=True)


def _der(path: Path) -> bytes:
    text = path.read_text()
    start = text.index("-----BEGIN CERTIFICATE-----")
    return ssl.PEM_cert_to_DER_cert(text[start:text.index("-----END CERTIFICATE-----", start) + 25])


def _listed(peer: Peer, key: str) -> bool:
    request = DescribeConfigsRequest(resources=[Resource(resource_type=BROKER, resource_name="1",
                                                         configuration_keys=[key])])
    return bool(peer.send(request, 4).results[0].configs)


def _alter(peer: Peer, label: str, name: str, *ops: tuple[str, int, str | None]) -> None:
    peer.ask(label, IncrementalAlterConfigsRequest(resources=[Alter(
        resource_type=BROKER, resource_name=name,
        configs=[Op(name=k, config_operation=o, value=v) for k, o, v in ops])]), 1)


def _describe(peer: Peer, label: str, name: str, keys: list[str]) -> None:
    peer.ask(label, DescribeConfigsRequest(resources=[Resource(resource_type=BROKER, resource_name=name,
                                                               configuration_keys=keys)],
                                           include_synonyms=True), 4)


def rotate_and_refuse(pki):
    def scenario(peer: Peer) -> None:
        keys = [LOCATION, PASSWORD, "ssl.keystore.location"]
        _describe(peer, "before", "1", keys)
        _alter(peer, "rotate", "1", (LOCATION, SET, str(pki.second)), (PASSWORD, SET, "new-secret"))
        wait_for(lambda: _served_certificate(peer.ssl_port) == _der(pki.second), timeout_s=30,
                 what=f"{peer.name}: the new certificate served")
        wait_for(lambda: _listed(peer, LOCATION), timeout_s=15, what=f"{peer.name}: the rotation described")
        _describe(peer, "after", "1", keys)
        _alter(peer, "unloadable", "1", (LOCATION, SET, str(pki.broken)))
        _alter(peer, "missing", "1", (LOCATION, SET, str(pki.directory / "missing.pem")))
        _alter(peer, "wrong password", "1", (PASSWORD, SET, "not-it"))
        _alter(peer, "another subject", "1", (LOCATION, SET, str(pki.other)), (PASSWORD, DELETE, None))
        _alter(peer, "no listener prefix", "1", ("ssl.keystore.location", SET, str(pki.first)))
        _alter(peer, "cluster-wide", "", (LOCATION, SET, str(pki.first)))
        _alter(peer, "client auth", "1", ("listener.name.ssl.ssl.client.auth", SET, "required"))
        _alter(peer, "jaas", "1", ("listener.name.plaintext.plain.sasl.jaas.config", SET, "x"))
        _alter(peer, "sasl mechanisms", "1", ("sasl.enabled.mechanisms", SET, "PLAIN"))
        assert _served_certificate(peer.ssl_port) == _der(pki.second)
        _alter(peer, "back", "1", (LOCATION, DELETE, None), (PASSWORD, DELETE, None))
        wait_for(lambda: _served_certificate(peer.ssl_port) == _der(pki.first), timeout_s=30,
                 what=f"{peer.name}: the static certificate served again")
        wait_for(lambda: not _listed(peer, LOCATION), timeout_s=15, what=f"{peer.name}: the deletion described")
        _describe(peer, "back", "1", keys)
        # Names may be added to the certificate, not dropped (Kafka's ensureCompatibleSANs: containsAll).
        _alter(peer, "fewer names", "1", (LOCATION, SET, str(pki.fewer_names)))
        _alter(peer, "expired", "1", (LOCATION, SET, str(pki.expired)))
        _alter(peer, "more names", "1", (LOCATION, SET, str(pki.more_names)))
        wait_for(lambda: _served_certificate(peer.ssl_port) == _der(pki.more_names), timeout_s=30,
                 what=f"{peer.name}: the certificate with more names served")
    return scenario


def assignment_intervals(peer: Peer) -> None:
    keys = ["group.consumer.assignment.interval.ms", "group.share.assignment.interval.ms",
            "group.streams.assignment.interval.ms"]
    _alter(peer, "interval cluster-wide", "", ("group.consumer.assignment.interval.ms", SET, "2000"))
    _alter(peer, "interval here", "1", ("group.share.assignment.interval.ms", SET, "3000"))
    _alter(peer, "interval over the bound", "1", ("group.streams.assignment.interval.ms", SET, "20000"))
    _alter(peer, "interval negative", "1", ("group.share.assignment.interval.ms", SET, "-1"))
    _alter(peer, "interval bound", "", ("group.consumer.max.assignment.interval.ms", SET, "20000"))
    def in_force() -> bool:
        request = DescribeConfigsRequest(resources=[Resource(resource_type=BROKER, resource_name="1",
                                                             configuration_keys=keys[:2])])
        return [c.value for c in peer.send(request, 4).results[0].configs] == ["2000", "3000"]
    wait_for(in_force, timeout_s=30, what=f"{peer.name}: intervals in force")
    _describe(peer, "intervals", "1", keys)
    _describe(peer, "intervals cluster-wide", "", keys)
    _alter(peer, "intervals back", "", ("group.consumer.assignment.interval.ms", DELETE, None))
    _alter(peer, "intervals back here", "1", ("group.share.assignment.interval.ms", DELETE, None),
           ("group.streams.assignment.interval.ms", DELETE, None))


def test_keystore_rotation_as_kafka_answers(ebb_peer, kafka_peer, pki):
    assert compare(rotate_and_refuse(pki), ebb_peer, kafka_peer, ALLOWED_HERE) == []


def test_assignment_intervals_as_kafka_answers(ebb_peer, kafka_peer):
    assert compare(assignment_intervals, ebb_peer, kafka_peer, ALLOWED_HERE) == []
