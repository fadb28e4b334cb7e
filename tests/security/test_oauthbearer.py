"""SASL OAUTHBEARER with Kafka's default (unsecured) validator on a SASL_PLAINTEXT listener: librdkafka's
unsecured JWT and a token from an oauth_cb authenticate; an expired token is refused the way Kafka
refuses it (the JSON challenge, then SASL_AUTHENTICATION_FAILED carrying it), as franz-go's TestOAuthAuth
expects."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer

from protocol.errors import ErrorCode
from protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest
from tests.broker.wire_client import WireClient, metadata
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.oauthbearer_tokens import initial, jws

pytestmark = pytest.mark.timeout(60)

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    sasl_port = free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("oauthbearer"))
    process.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            f'{MODULE} required unsecuredLoginStringClaim_sub="admin";',
    })
    process.sasl_port = sasl_port
    with process:
        yield process


def produce(broker, **config) -> list:
    """Produce one record over the SASL listener; the errors the client reported (or none)."""
    errors: list = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "OAUTHBEARER", "error_cb": errors.append, "message.timeout.ms": 5000,
                         **config})
    delivered: list = []
    producer.produce("oauth-topic", b"v", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(8)
    return errors if errors else [err for err in delivered if err is not None]


def test_librdkafka_unsecured_jwt_authenticates(broker):
    assert produce(broker, **{"enable.sasl.oauthbearer.unsecure.jwt": True,
                              "sasl.oauthbearer.config": "principal=alice"}) == []
    assert "\"principal\": \"User:alice\"" in broker.log_text()


def test_a_token_from_a_callback_authenticates_and_an_expired_one_is_refused(broker):
    def token(claims: dict):
        return lambda _config: (jws(claims), time.time() + 3600)
    assert produce(broker, oauth_cb=token({"sub": "carol", "exp": time.time() + 3600})) == []
    errors = produce(broker, oauth_cb=token({"sub": "carol", "exp": time.time() - 60}))
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "invalid_token" in errors[0].str()


def test_the_refusal_on_the_wire_is_kafkas(broker):
    expired = jws({"sub": "admin", "exp": int(time.time()) - 60})
    with WireClient(broker.sasl_port) as client:
        answer = client.send(SaslHandshakeRequest(mechanism="OAUTHBEARER"), version=1)
        assert answer.error_code == ErrorCode.NONE and answer.mechanisms == ["SCRAM-SHA-256", "OAUTHBEARER"]
        first = client.send(SaslAuthenticateRequest(auth_bytes=initial(expired)), version=2)
        assert (first.error_code, first.auth_bytes) == (ErrorCode.NONE, b'{"status":"invalid_token"}')
        final = client.send(SaslAuthenticateRequest(auth_bytes=b"\x01"), version=2)
        assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert final.error_message == '{"status":"invalid_token"}'
        with pytest.raises(ConnectionError):
            metadata(client, None)
    good = jws({"sub": "admin", "exp": int(time.time()) + 60})
    with WireClient(broker.sasl_port) as client:
        client.send(SaslHandshakeRequest(mechanism="OAUTHBEARER"), version=1)
        answer = client.send(SaslAuthenticateRequest(auth_bytes=initial(good)), version=2)
        assert (answer.error_code, answer.auth_bytes) == (ErrorCode.NONE, b"")
        assert metadata(client, None).brokers
