"""A TLS listener's keystore rotated at runtime (KIP-226): new connections get the new certificate,
connections already open keep working, passwords are described as Kafka does (null, sensitive), and
what Kafka's SslFactory would refuse (a keystore that does not load, another subject) is refused
with INVALID_REQUEST while the key material in force stays."""

from __future__ import annotations

import shutil
import ssl

import pytest

from protocol.enums import ConfigSource, ConfigType
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest
from tests.broker.test_configs import BROKER, DELETE, SET, _configs, _incremental
from tests.broker.wire_client import WireClient
from tests.security.certs import SSL_KEY_PASSWORD as PASSWORD
from tests.security.certs import SSL_KEYSTORE_LOCATION as LOCATION
from tests.security.certs import rotation_pki, ssl_listener_broker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return rotation_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, ca):
    with ssl_listener_broker(tmp_path_factory.mktemp("dyntls"), ca.first.combined) as process:
        yield process


@pytest.fixture(scope="module")
def admin(broker):
    with WireClient(broker.port) as client:
        yield client


def _tls_client(broker, ca) -> WireClient:
    client = WireClient(broker.ssl_port)
    context = ssl.create_default_context(cafile=str(ca.pem.cert))
    client.sock = context.wrap_socket(client.sock, server_hostname="localhost")
    return client


def _certificate(client: WireClient) -> bytes:
    return client.sock.getpeercert(binary_form=True)


def _der(pem) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.cert.read_text())


def _works(client: WireClient) -> bool:
    return client.send(ApiVersionsRequest(), 0).error_code == ErrorCode.NONE


def _refused(admin, operations, name="1") -> str:
    result = _incremental(admin, name, operations, resource_type=BROKER)
    assert result.error_code == ErrorCode.INVALID_REQUEST, (result.error_code, result.error_message)
    return result.error_message


def test_rotated_keystore_reaches_new_connections_and_old_ones_keep_working(broker, admin, ca, tmp_path):
    old = _tls_client(broker, ca)
    assert _certificate(old) == _der(ca.first) and _works(old)

    keystore = tmp_path / "keystore.pem"
    shutil.copy(ca.second.combined, keystore)
    result = _incremental(admin, "1", [(LOCATION, SET, str(keystore)), (PASSWORD, SET, "new-secret")],
                          resource_type=BROKER)
    assert result.error_code == ErrorCode.NONE, result.error_message
    with _tls_client(broker, ca) as new:
        assert _certificate(new) == _der(ca.second) and _works(new)
    assert _works(old) and _certificate(old) == _der(ca.first)

    # Rewritten in place: an alter of the same location reloads the file (as Kafka does).
    shutil.copy(ca.third.combined, keystore)
    assert _incremental(admin, "1", [(LOCATION, SET, str(keystore))], resource_type=BROKER).error_code == 0
    with _tls_client(broker, ca) as new:
        assert _certificate(new) == _der(ca.third) and _works(new)
    assert _works(old)
    old.close()

    # Described as Kafka does: the password null and sensitive, each under the shared property.
    configs = _configs(admin, "1", resource_type=BROKER, synonyms=True)
    location, password = configs[LOCATION], configs[PASSWORD]
    dynamic = ConfigSource.DYNAMIC_BROKER_CONFIG
    assert (location.value, location.config_source, location.is_sensitive) == (str(keystore), dynamic, False)
    assert [(s.name, s.value, s.source) for s in location.synonyms] == [
        (LOCATION, str(keystore), ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("ssl.keystore.location", str(ca.first.combined), ConfigSource.STATIC_BROKER_CONFIG)]
    assert (password.value, password.is_sensitive, password.config_type) == (None, True, ConfigType.PASSWORD)
    assert [(s.name, s.value) for s in password.synonyms] == [(PASSWORD, None)]

    # Back to the static keystore after a restart-free DELETE, and the dynamic one survives a restart.
    assert _incremental(admin, "1", [(LOCATION, DELETE, None), (PASSWORD, DELETE, None)],
                        resource_type=BROKER).error_code == 0
    with _tls_client(broker, ca) as new:
        assert _certificate(new) == _der(ca.first)
    assert _incremental(admin, "1", [(LOCATION, SET, str(keystore)), (PASSWORD, SET, "new-secret")],
                        resource_type=BROKER).error_code == 0
    admin.close()
    broker.restart()
    admin.sock = WireClient(broker.port).sock
    with _tls_client(broker, ca) as new:
        assert _certificate(new) == _der(ca.third)
    # Stored key material that no longer loads at start-up: logged, and the properties file's is served.
    keystore.unlink()
    admin.close()
    broker.restart()
    admin.sock = WireClient(broker.port).sock
    with _tls_client(broker, ca) as new:
        assert _certificate(new) == _der(ca.first)
    assert "TLS key material not reloaded" in broker.log_text()
    assert _incremental(admin, "1", [(LOCATION, DELETE, None), (PASSWORD, DELETE, None)],
                        resource_type=BROKER).error_code == 0


def test_what_kafka_refuses_is_refused_and_nothing_changes(broker, admin, ca, tmp_path):
    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    assert "Invalid dynamic configuration" in _refused(admin, [(LOCATION, SET, str(broken))])
    assert "Invalid dynamic configuration" in _refused(admin, [(LOCATION, SET, str(tmp_path / "missing.pem"))])
    wrong_password = [(LOCATION, SET, str(ca.second.combined)), (PASSWORD, SET, "not-it")]
    assert "Invalid dynamic configuration" in _refused(admin, wrong_password)
    assert "DistinguishedName does not match" in _refused(admin, [(LOCATION, SET, str(ca.other.combined))])
    assert "only per-listener" in _refused(admin, [("ssl.keystore.location", SET, str(ca.second.combined))])
    assert "default cluster level" in _refused(admin, [(LOCATION, SET, str(ca.second.combined))], name="")
    assert "only its TLS key material" in _refused(admin, [("listener.name.ssl.ssl.client.auth", SET, "required")])
    assert "not a TLS listener" in _refused(admin, [("listener.name.plaintext.ssl.keystore.location", SET,
                                                     str(ca.second.combined))])
    assert "no store password" in _refused(admin, [("listener.name.ssl.ssl.keystore.password", SET, "x")])
    assert "no truststore" in _refused(admin, [("listener.name.ssl.ssl.truststore.location", SET, str(ca.pem.cert))])
    # validate_only checks the keystore without putting it in force
    result = _incremental(admin, "1", [(LOCATION, SET, str(ca.other.combined))], resource_type=BROKER,
                          validate_only=True)
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert _configs(admin, "1", resource_type=BROKER).get(LOCATION) is None
    with _tls_client(broker, ca) as client:
        assert _certificate(client) == _der(ca.first) and _works(client)
