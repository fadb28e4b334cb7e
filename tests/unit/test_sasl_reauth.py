"""KIP-368 without a broker: the session lifetime Kafka's SaslServerAuthenticator computes, where
connections.max.reauth.ms is read from (SaslChannelBuilder's lookup), and a session's re-authentication
rules (KafkaChannel.maybeBeginServerReauthentication, ReauthInfo)."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.security.errors import AuthenticationFailed, InvalidCredentials
from broker.security.listener_security import SecuritySettingError, check
from broker.security.oauthbearer import OAuthBearerServer, UnsecuredValidator, java_round, validated
from broker.security.sasl_config import SaslListener, max_reauth_ms, sasl_listeners
from broker.security.sasl_session import MIN_REAUTH_INTERVAL_NS, SaslSession, Stage, Unanswered, session_lifetime_ms
from tests.support.oauthbearer_tokens import initial, jws

NOW = 1_800_000_000_000
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


@pytest.mark.parametrize(("max_ms", "expiry", "expected"), [
    (0, None, None),  # off: no lifetime, no expiry (PLAIN, SCRAM by default)
    (-5, None, None),  # a negative maximum is not "set" either
    (3000, None, 3000),  # the maximum alone
    (0, NOW + 60_000, 60_000),  # OAUTHBEARER's exp alone: Kafka answers it even with the maximum at 0
    (3000, NOW + 60_000, 3000),  # the token outlives the maximum
    (3000, NOW + 1_000, 1_000),  # the token ends first
    (3000, NOW - 500, 0),  # accepted within the clock skew, already past exp: 0, and expired at once
    (0, NOW - 500, 0),
])
def test_session_lifetime_is_the_maximum_capped_by_the_credential(max_ms, expiry, expected):
    assert session_lifetime_ms(max_ms, expiry, NOW) == expected


def test_the_token_lifetime_is_exp_in_ms_rounded_as_java():
    assert validated(jws({"sub": "alice", "exp": NOW / 1000 + 1.2345}), UnsecuredValidator(), NOW) == \
        ("alice", NOW + 1235)
    assert java_round(2.5) == 3 and java_round(-2.5) == -2 and java_round(float("inf")) == 2**63 - 1


def test_max_reauth_is_read_per_mechanism_then_listener_then_broker():
    props = {"connections.max.reauth.ms": "1000", "listener.name.sasl.connections.max.reauth.ms": " 2000 ",
             "listener.name.sasl.oauthbearer.connections.max.reauth.ms": "0",
             "listener.name.other.plain.connections.max.reauth.ms": "9"}
    found = max_reauth_ms(props, "SASL", ("PLAIN", "OAUTHBEARER"))
    assert found == {"PLAIN": 2000, "OAUTHBEARER": 0}
    assert max_reauth_ms({"connections.max.reauth.ms": "1000"}, "SASL", ("PLAIN",)) == {"PLAIN": 1000}
    assert max_reauth_ms({}, "SASL", ("PLAIN",)) == {"PLAIN": 0}


@pytest.mark.parametrize("key", ["connections.max.reauth.ms", "listener.name.sasl_plaintext.connections.max.reauth.ms",
                                 "listener.name.sasl_plaintext.plain.connections.max.reauth.ms"])
@pytest.mark.parametrize("value", ["soon", "1.5", "1_000", "9223372036854775808"])
def test_a_value_that_is_no_long_stops_start_up_naming_the_property(key, value):
    props = {"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
             key: value}
    with pytest.raises(SecuritySettingError, match=f"{key}: .* is not a number of type LONG"):
        sasl_listeners(props, {"SASL_PLAINTEXT": "SASL_PLAINTEXT"})


def test_the_properties_are_accepted_where_kafka_reads_them_and_refused_elsewhere():
    sasl = {"listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT"}
    for key in ("connections.max.reauth.ms", "listener.name.sasl_plaintext.connections.max.reauth.ms",
                "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms"):
        check({**sasl, key: "5000"}, ["SASL_PLAINTEXT", "PLAINTEXT"], [])
    for key in ("listener.name.plaintext.connections.max.reauth.ms",  # no SASL there
                "listener.name.sasl_plaintext.gssapi.connections.max.reauth.ms"):
        with pytest.raises(SecuritySettingError, match=key):
            check({**sasl, key: "5000"}, ["SASL_PLAINTEXT", "PLAINTEXT"], [])


def session(max_ms: int = 3000, mechanisms: tuple[str, ...] = ("PLAIN", "OAUTHBEARER")) -> SaslSession:
    listener = SaslListener(mechanisms, {"alice": "alice-secret", "bob": "bob-secret"}, UnsecuredValidator(),
                            {mechanism: max_ms for mechanism in mechanisms})
    return SaslSession(listener, None)  # type: ignore[arg-type]  # PLAIN and OAUTHBEARER never read it


def plain(user: str) -> bytes:
    return b"\x00" + user.encode() + b"\x00" + user.encode() + b"-secret"


def login(s: SaslSession, token: bytes, mechanism: str = "PLAIN") -> bytes:
    assert s.handshake(mechanism, 1)
    return asyncio.run(s.authenticate(token))


def test_without_a_lifetime_a_session_neither_expires_nor_re_authenticates():
    s = session(max_ms=0)
    login(s, plain("alice"))
    assert s.authenticated and s.lifetime_ms == 0 and s.expires_ns is None
    assert not s.expired(time.monotonic_ns() + 10**15)
    assert not s.begin_reauthentication(time.monotonic_ns())
    assert s.stage is Stage.DONE


def test_a_session_expires_after_its_lifetime_and_may_re_authenticate_once_a_second():
    s = session(max_ms=3000)
    before = time.monotonic_ns()
    login(s, plain("alice"))
    assert s.lifetime_ms == 3000
    assert s.expires_ns is not None and 0 <= s.expires_ns - before - 3_000_000_000 < 1_000_000_000
    assert not s.expired(s.expires_ns) and s.expired(s.expires_ns + 1)
    now = time.monotonic_ns()
    assert s.begin_reauthentication(now)
    assert s.reauthenticating and s.admits(17) and not s.admits(3)
    login(s, plain("alice"))
    assert s.authenticated and not s.reauthenticating and s.principal == "User:alice"
    assert not s.begin_reauthentication(now + MIN_REAUTH_INTERVAL_NS - 1)  # too soon: served as a request
    assert s.begin_reauthentication(now + MIN_REAUTH_INTERVAL_NS)


def test_re_authentication_refuses_another_principal():
    s = session()
    login(s, plain("alice"))
    assert s.begin_reauthentication(time.monotonic_ns())
    with pytest.raises(AuthenticationFailed) as refused:
        login(s, plain("bob"))
    assert str(refused.value) == "Cannot change principals during re-authentication from User.alice: User.bob"
    assert s.stage is Stage.FAILED


def test_re_authentication_with_another_mechanism_is_refused_unanswered_at_its_first_token():
    s = session()
    login(s, plain("alice"))
    assert s.begin_reauthentication(time.monotonic_ns())
    assert s.handshake("OAUTHBEARER", 1)  # accepted, as Kafka's handshake answer is NONE
    with pytest.raises(Unanswered, match="SASL mechanism 'OAUTHBEARER' requested by client is not supported "
                                         "for re-authentication of mechanism 'PLAIN'"):
        asyncio.run(s.authenticate(initial(jws({"sub": "alice", "exp": time.time() + 60}))))
    assert s.stage is Stage.FAILED


def test_invalid_credentials_are_worded_as_a_re_authentication():
    s = session()
    token = initial(jws({"sub": "alice", "exp": time.time() + 60}))
    login(s, token, "OAUTHBEARER")
    assert s.lifetime_ms == 3000  # the maximum, before the token's hour
    assert s.begin_reauthentication(time.monotonic_ns())
    with pytest.raises(InvalidCredentials) as refused:
        login(s, b"not a first message", "OAUTHBEARER")
    assert str(refused.value) == ("Authentication failed during re-authentication due to invalid credentials "
                                  "with SASL mechanism OAUTHBEARER")


def test_an_oauthbearer_session_ends_at_the_tokens_exp_even_with_the_maximum_off():
    s = session(max_ms=0)
    exp = time.time() + 60
    login(s, initial(jws({"sub": "alice", "exp": exp})), "OAUTHBEARER")
    assert 58_000 < s.lifetime_ms <= 60_001  # exp rounded to the ms, now truncated (as Kafka)
    server = OAuthBearerServer(UnsecuredValidator())
    server.respond(initial(jws({"sub": "alice", "exp": exp})))
    assert server.lifetime_ms == java_round(exp * 1000)
