"""What Kafka's SslFactory checks before it takes new listener key material, and what it then reaches
(broker/security/dynamic_tls.py): the inter-broker listener's rotation reaches this broker's connections
to the others; a certificate outside its validity period, or (on the inter-broker listener) one the
truststores do not accept, is refused; new names may be added but none dropped; an alter's key material
never replaces newer material a reload applied meanwhile; passwords are known by Kafka's PASSWORD list."""

import ssl

import pytest

from broker.cluster.store import EmbeddedStore
from broker.config import load_config
from broker.dynamic_config import DynamicBrokerConfig, DynamicConfigError
from broker.security.dynamic_tls import handshake
from broker.security.passwords import is_password
from tests.security.certs import SSL_KEY_PASSWORD as PASSWORD
from tests.security.certs import SSL_KEYSTORE_LOCATION as LOCATION
from tests.security.certs import CertificateAuthority, rotation_pki


@pytest.fixture
async def brokers(tmp_path):
    """Makes DynamicBrokerConfigs of one SSL listener (the inter-broker one when `cluster`), loaded."""
    stores = []

    async def make(keystore, *extra: str, cluster: bool = False) -> DynamicBrokerConfig:
        props = [f"log.dirs={tmp_path / 'logs'}", "listeners=SSL://127.0.0.1:0",
                 "listener.security.protocol.map=SSL:SSL", "ssl.keystore.type=PEM",
                 f"ssl.keystore.location={keystore}", *extra]
        if cluster:  # a broker of a cluster: it connects to the others over SSL, trusting the test's CA
            props += ["zookeeper.connect=127.0.0.1:1", "inter.broker.listener.name=SSL", "ssl.truststore.type=PEM",
                      f"ssl.truststore.location={ca_of[0].pem.cert}", "ssl.client.auth=required"]
        stores.append(await EmbeddedStore.open(tmp_path / f"meta{len(stores)}.json"))
        dynamic = DynamicBrokerConfig(stores[-1], load_config(None, props))
        await dynamic.load()
        return dynamic

    ca_of: list[CertificateAuthority] = [rotation_pki(tmp_path)]
    make.ca = ca_of[0]  # type: ignore[attr-defined]
    yield make
    for store in stores:
        await store.close()


def _set(location, password: str | None = None):
    def change(configs: dict) -> dict:
        return {**configs, LOCATION: str(location), **({PASSWORD: password} if password else {})}
    return change


def _client_certificate(client: ssl.SSLContext, ca) -> bytes:
    """The certificate `client` presents to a server that asks for one (an in-memory handshake)."""
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca.pem.cert))
    server.load_cert_chain(ca.first.combined)
    server.verify_mode = ssl.CERT_REQUIRED
    return handshake(client, server, "localhost")[1].getpeercert(binary_form=True)


def _der(pem) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.cert.read_text())


async def test_the_inter_broker_rotation_reaches_connections_to_the_other_brokers(brokers):
    ca = brokers.ca
    dynamic = await brokers(ca.first.combined, cluster=True)
    security = dynamic.config.inter_broker_security
    before = security.ssl_context
    assert _client_certificate(before, ca) == _der(ca.first)
    await dynamic.alter("1", _set(ca.second.combined, "new-secret"))
    assert security.ssl_context is not before and security.ssl_context.check_hostname
    assert _client_certificate(security.ssl_context, ca) == _der(ca.second)


async def test_certificates_outside_their_validity_are_refused(brokers, tmp_path):
    ca = brokers.ca
    dynamic = await brokers(ca.first.combined)
    expired = ca.issue("expired", server=True, valid_from_days=-3, valid_days=1, O="Ebb tests", CN="localhost")
    early = ca.issue("early", server=True, valid_from_days=3, O="Ebb tests", CN="localhost")
    for pem in (expired, early):
        with pytest.raises(DynamicConfigError, match="not valid now"):
            await dynamic.alter("1", _set(pem.combined))
    assert dynamic.tls.listeners["SSL"].material.subject == "User:CN=localhost,O=Ebb tests"


async def test_the_inter_broker_listener_refuses_what_its_truststore_does_not_accept(brokers, tmp_path):
    ca = brokers.ca
    (tmp_path / "stranger").mkdir()
    stranger = CertificateAuthority(tmp_path / "stranger", name="Stranger CA")
    foreign = stranger.issue("foreign", server=True, O="Ebb tests", CN="localhost")
    dynamic = await brokers(ca.first.combined, cluster=True)
    with pytest.raises(DynamicConfigError, match="Validation of dynamic config update of SSLFactory failed"):
        await dynamic.alter("1", _set(foreign.combined))
    assert _client_certificate(dynamic.config.inter_broker_security.ssl_context, ca) == _der(ca.first)
    # Not the inter-broker listener: as Kafka, no handshake check (clients may trust the new CA already).
    other = await brokers(ca.first.combined)
    await other.alter("1", _set(foreign.combined))


async def test_names_may_be_added_but_not_dropped(brokers):
    ca = brokers.ca
    dynamic = await brokers(ca.first.combined)
    more = ca.issue("more", server=True, dns_names=("localhost", "broker1.example"), O="Ebb tests", CN="localhost")
    fewer = ca.issue("fewer", server=True, dns_names=(), O="Ebb tests", CN="localhost")
    with pytest.raises(DynamicConfigError, match="SubjectAltNames do not match"):
        await dynamic.alter("1", _set(fewer.combined))
    await dynamic.alter("1", _set(more.combined))
    assert ("DNS", "broker1.example") in dynamic.tls.listeners["SSL"].material.alt_names


async def test_an_older_build_never_replaces_a_newer_one(brokers):
    ca = brokers.ca
    dynamic = await brokers(ca.first.combined)
    base = {**dynamic.config.explicit_properties}
    older = await dynamic.tls.check({**base, LOCATION: str(ca.second.combined), PASSWORD: "new-secret"})
    await dynamic.tls.reload({**base, LOCATION: str(ca.third.combined), PASSWORD: "new-secret"})  # a watch's
    dynamic.tls.apply(older)  # the alter that built `older` finishes its write after that reload
    live = dynamic.tls.listeners["SSL"]
    assert dict(live.material.settings)["ssl.keystore.location"] == str(ca.third.combined)
    assert live.context is live.material.listener.context


async def test_a_listener_serving_its_first_key_material_still_checks_changes(brokers, tmp_path):
    ca = brokers.ca
    dynamic = await brokers(ca.first.combined)
    # The stored key material does not load at start-up: the properties file's is served, and is the
    # one a change is compared with.
    dynamic.tls.listeners["SSL"].material = None  # as before the start-up load
    await dynamic.tls.reload({**dynamic.config.explicit_properties, LOCATION: str(tmp_path / "gone.pem")})
    assert dynamic.tls.listeners["SSL"].material is not None
    dynamic.tls.listeners["SSL"].material = None  # and should that read have failed, an alter reads it
    with pytest.raises(DynamicConfigError, match="DistinguishedName does not match"):
        await dynamic.alter("1", _set(ca.other.combined))


def test_kafka_password_configs_are_secrets():
    for key in ("sasl.oauthbearer.client.credentials.client.secret",
                "sasl.oauthbearer.assertion.private.key.passphrase",
                "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config", "listener.name.ssl.ssl.key.password",
                "delegation.token.secret.key", "ssl.keystore.key", "zookeeper.ssl.keystore.password",
                "my.custom.password"):
        assert is_password(key), key
    for key in ("ssl.keystore.location", "sasl.oauthbearer.client.credentials.client.id", "log.retention.ms"):
        assert not is_password(key), key


async def test_unreadable_key_material_in_force_refuses_only_changes_to_it(brokers, tmp_path):
    ca = brokers.ca
    keystore = tmp_path / "static.pem"
    keystore.write_text(ca.first.combined.read_text())
    dynamic = await brokers(keystore)
    dynamic.tls.listeners["SSL"].material = None  # as if the start-up load had failed
    keystore.unlink()  # and the properties file's keystore were gone since
    await dynamic.alter("1", lambda configs: {**configs, "leader.replication.throttled.rate": "1000000"})
    with pytest.raises(DynamicConfigError, match="cannot be read to check"):
        await dynamic.alter("1", _set(ca.second.combined, "new-secret"))
