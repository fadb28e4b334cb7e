"""OAUTHBEARER's server side against Kafka's unsecured validator rules (OAuthBearerUnsecuredJws,
OAuthBearerValidationUtils, OAuthBearerSaslServer), without a broker."""

from __future__ import annotations

import base64

import pytest

from broker.security.errors import AuthenticationFailed
from broker.security.oauthbearer import OAuthBearerServer, UnsecuredValidator, _Rejected, validate
from client.jaas import parse_jaas_config
from tests.support.oauthbearer_tokens import initial, jws

NOW_MS = 1_800_000_000_000


GOOD = {"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 - 1}


def test_a_good_token_names_its_principal():
    assert validate(jws(GOOD), UnsecuredValidator(), NOW_MS) == "alice"
    # ">>>" and "???" encode to "-" and "_" (Base64URL's own letters) at one of three alignments
    with_dash = next(claims for claims in ({**GOOD, "name": "x" * pad + ">>>???"} for pad in range(3))
                     if "-" in jws(claims) and "_" in jws(claims))
    assert validate(jws(with_dash), UnsecuredValidator(), NOW_MS) == "alice"
    padded = ".".join(part + "=" * (-len(part) % 4) for part in jws(GOOD).split(".")[:2]) + "."
    assert validate(padded, UnsecuredValidator(), NOW_MS) == "alice"
    claims = {**GOOD, "user": "bob"}
    assert validate(jws(claims), UnsecuredValidator(principal_claim="user"), NOW_MS) == "bob"


@pytest.mark.parametrize("token, reason", [
    (jws(GOOD, header={"alg": "HS256"}), "'none' for an algorithm"),
    (jws(GOOD, signature="c2ln"), "must not contain a digital signature"),
    (jws({"sub": "alice"}), "No expiration time"),
    (jws({"exp": NOW_MS / 1000 + 60}), "No principal name"),
    (jws({**GOOD, "sub": " "}), "No principal name"),
    (jws({**GOOD, "exp": "soon"}), "'exp' claim was not of type Number"),
    (jws({**GOOD, "exp": NOW_MS / 1000}), "on or after the Expiration Time"),  # exp == now: expired
    (jws({**GOOD, "iat": NOW_MS / 1000 + 5}), "Issued At value was after"),
    (jws({**GOOD, "iat": GOOD["exp"] + 1, "exp": GOOD["exp"]}), "Issued At"),
    (jws(GOOD, encode=base64.b64encode).replace("e", "+", 1), "malformed Base64"),  # Base64URL, not Base64
    ("e30.e3=0.", "malformed"),
    ("a.b", "3 dot-separated"),
    ("a..b", "'..'"),
    ("bm90IGpzb24.e30.", "malformed JSON"),
])
def test_tokens_kafka_rejects(token, reason):
    with pytest.raises(_Rejected, match=reason):
        validate(token, UnsecuredValidator(), NOW_MS)


def test_clock_skew_and_required_scope():
    expired = jws({**GOOD, "iat": NOW_MS / 1000 - 10, "exp": NOW_MS / 1000 - 1})
    assert validate(expired, UnsecuredValidator(clock_skew_ms=2000), NOW_MS) == "alice"
    needs = UnsecuredValidator(required_scope=("read", "write"))
    assert validate(jws({**GOOD, "scope": ["read", "write", "x"]}), needs, NOW_MS) == "alice"
    with pytest.raises(_Rejected) as info:
        validate(jws({**GOOD, "scope": "read"}), needs, NOW_MS)
    assert info.value.scope == "[read, write]"


def test_the_exchange_answers_a_rejected_token_with_kafkas_json_then_fails_on_the_clients_ctrl_a():
    server = OAuthBearerServer(UnsecuredValidator())
    expired = jws({**GOOD, "exp": 1})
    assert server.respond(initial(expired)) == b'{"status":"invalid_token"}' and server.principal is None
    with pytest.raises(AuthenticationFailed, match='^{"status":"invalid_token"}$'):
        server.respond(b"\x01")
    scoped = OAuthBearerServer(UnsecuredValidator(required_scope=("admin",)))
    reply = scoped.respond(initial(jws({"sub": "alice", "exp": 4_000_000_000})))
    assert reply == b'{"status":"insufficient_scope", "scope":"[admin]"}'


def test_the_exchange_accepts_a_good_token_with_extensions_and_checks_the_authzid():
    token = jws({"sub": "alice", "exp": 4_000_000_000})
    server = OAuthBearerServer(UnsecuredValidator())
    assert server.respond(initial(token, extensions="traceId=abc 1\x01")) == b"" and server.principal == "alice"
    with pytest.raises(AuthenticationFailed, match=r"authorization id \(bob\)"):
        OAuthBearerServer(UnsecuredValidator()).respond(initial(token, authzid="bob"))
    assert OAuthBearerServer(UnsecuredValidator()).respond(initial(token, authzid="alice")) == b""


@pytest.mark.parametrize("message", [
    b"n,,auth=Bearer x\x01\x01",  # no separator after the GS2 header
    b"n,,\x01auth=Basic abc\x01\x01",
    b"n,,\x01\x01",  # no auth
    b"\x01",  # ^A with no error outstanding
    b"\xff",
])
def test_messages_that_are_not_an_initial_response_fail_with_kafkas_text(message):
    with pytest.raises(AuthenticationFailed, match="invalid credentials with SASL mechanism OAUTHBEARER"):
        OAuthBearerServer(UnsecuredValidator()).respond(message)


def test_a_header_without_alg_fails_the_authentication():
    with pytest.raises(AuthenticationFailed):
        OAuthBearerServer(UnsecuredValidator()).respond(initial(jws(GOOD, header={"typ": "JWT"})))


def test_validator_options_from_the_jaas_entry():
    module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
    entry = parse_jaas_config(f'{module} required unsecuredValidatorPrincipalClaimName="user" '
                              f'unsecuredValidatorRequiredScope="a b" unsecuredValidatorAllowableClockSkewMs="250";')
    assert UnsecuredValidator.from_jaas(entry) == UnsecuredValidator("user", "scope", ("a", "b"), 250)
    assert UnsecuredValidator.from_jaas(parse_jaas_config(f"{module} required;")) == UnsecuredValidator()
    with pytest.raises(ValueError, match="must not be negative"):
        UnsecuredValidator.from_jaas(
            parse_jaas_config(f'{module} required unsecuredValidatorAllowableClockSkewMs="-1";'))
    with pytest.raises(ValueError, match="OAuthBearerLoginModule"):
        UnsecuredValidator.from_jaas(parse_jaas_config("org.example.Other required;"))
