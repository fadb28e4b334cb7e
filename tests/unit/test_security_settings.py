"""Kafka's client security properties as the CLI's --command-config and the Spark data source read them
(client/security_settings.py): what each becomes for our connections and for librdkafka, and every
setting that cannot be honoured refused by name."""

from __future__ import annotations

import ssl

import pytest

from client.security_settings import SecuritySettingError, security_settings
from tests.security.certs import CertificateAuthority

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="b\\"s";'
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="a";'


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    ca = CertificateAuthority(tmp_path_factory.mktemp("pki"))
    ca.client = ca.issue("client", server=False, password=b"key-secret", CN="client")
    return ca


def test_plaintext_is_the_default_and_needs_nothing():
    settings = security_settings({"client.id": "x"})
    assert settings.protocol == "PLAINTEXT"
    assert settings.client_security() is None and settings.librdkafka() == {}
    assert security_settings({"security.protocol": "plaintext"}).protocol == "PLAINTEXT"


def test_sasl_over_tls_with_a_pem_truststore(ca):
    settings = security_settings({
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "scram-sha-512",
        "kafka.sasl.jaas.config": SCRAM_JAAS, "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca.pem.cert), "kafka.subscribe": "ignored here"}, prefix="kafka.")
    security = settings.client_security()
    assert (security.sasl_mechanism, security.username, security.password) == ("SCRAM-SHA-512", "bob", 'b"s')
    assert security.ssl_context.verify_mode == ssl.CERT_REQUIRED and security.ssl_context.check_hostname
    assert security.ssl_context.cert_store_stats()["x509_ca"] == 1  # the truststore alone, not the system's CAs
    assert settings.librdkafka() == {
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
        "sasl.password": 'b"s', "ssl.endpoint.identification.algorithm": "https", "ssl.ca.location": str(ca.pem.cert)}


def test_tls_with_a_client_certificate_inline_and_no_host_name_check(ca):
    settings = security_settings({
        "security.protocol": "SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": ca.pem.cert.read_text(),
        "ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": ca.client.cert.read_text(),
        "ssl.keystore.key": ca.client.key.read_text(), "ssl.key.password": "key-secret",
        "ssl.endpoint.identification.algorithm": ""})
    security = settings.client_security()
    assert security.sasl_mechanism is None and not security.check_hostname
    assert not security.ssl_context.check_hostname
    config = settings.librdkafka()
    assert config["ssl.endpoint.identification.algorithm"] == "none"
    assert config["ssl.certificate.pem"].startswith("-----BEGIN CERTIFICATE")
    assert "ENCRYPTED" in config["ssl.key.pem"] and config["ssl.key.password"] == "key-secret"


def test_plain_over_sasl_plaintext_and_a_keystore_file(ca):
    settings = security_settings({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                  "sasl.jaas.config": PLAIN_JAAS})
    assert settings.client_security().ssl_context is None
    assert settings.librdkafka()["sasl.username"] == "alice"
    keystore = security_settings({"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                                  "ssl.keystore.location": str(ca.client.combined), "ssl.key.password": "key-secret"})
    assert keystore.librdkafka()["ssl.key.location"] == keystore.librdkafka()["ssl.certificate.location"]
    assert keystore.client_security().ssl_context.verify_mode == ssl.CERT_REQUIRED  # the system's CAs


@pytest.mark.parametrize(("props", "named"), [
    ({"security.protocol": "KERBEROS"}, "security.protocol=KERBEROS: not one of PLAINTEXT"),
    ({"security.protocol": "SASL_SSL", "sasl.jaas.config": PLAIN_JAAS}, "sasl.mechanism is not set"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": PLAIN_JAAS},
     "sasl.mechanism=GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config is needed"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"}, "login module"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "broken"},
     "sasl.jaas.config: expected"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": PLAIN_JAAS.replace(";", ' tokenauth="true";')}, "option tokenauth"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": PLAIN_JAAS.replace(' username="alice"', "")}, "needs username"),
    ({"sasl.mechanism": "PLAIN"}, "sasl.mechanism is set but security.protocol is PLAINTEXT"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS,
      "ssl.truststore.type": "PEM"}, "ssl.truststore.type is set but security.protocol is SASL_PLAINTEXT"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "ssl.truststore.type=JKS"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/ca.pem"}, "needs ssl.truststore.type=PEM"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/nowhere.pem"},
     "ssl.truststore.location: cannot load the CAs"),
    ({"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.key": "x"},
     "go together"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"},
     "ssl.endpoint.identification.algorithm=dns"),
    ({"security.protocol": "SSL", "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "ssl.cipher.suites is not supported"),
    ({"security.providers": "x"}, "security.providers is not supported"),
])
def test_what_cannot_be_honoured_is_refused_by_name(props, named):
    with pytest.raises(SecuritySettingError, match=named.replace("(", r"\(")):
        security_settings(props)


def test_a_prefix_names_the_option_as_given():
    with pytest.raises(SecuritySettingError, match="kafka.sasl.mechanism is not set"):
        security_settings({"kafka.security.protocol": "SASL_SSL"}, prefix="kafka.")
