"""OAUTHBEARER's server side against Kafka's unsecured validator rules (OAuthBearerUnsecuredJws,
OAuthBearerValidationUtils, OAuthBearerSaslServer), without a broker."""

from __future__ import annotations

import base64

import pytest

from broker.security.errors import AuthenticationFailed
from broker.security.oauthbearer import OAuthBearerServer, UnsecuredValidator, _Rejected, validate
from client.jaas import parse_jaas_config
from tests.support.oauthbearer_tokens import initial, jws, raw_jws

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


EXP = NOW_MS // 1000 + 60
OK = f'"sub":"alice","exp":{EXP}'


@pytest.mark.parametrize("claims", [
    '{' + OK + ',"x":' + "[" * 100_000 + "}",  # json.loads: RecursionError; Jackson: past its depth cap
    '{' + OK + ',"x":' + "[" * 1000 + "]" * 1000 + "}",  # 1001 levels with the object: one past the cap
    '{"sub":"alice","exp":1' + "0" * 1000 + "}",  # 1001 digits: past Jackson's number length cap
    '{"sub":"alice","exp":1' + "0" * 990 + "." + "0" * 10 + "}",
    '{"sub":"alice","exp":NaN}', '{"sub":"alice","exp":Infinity}', '{"sub":"alice","exp":-Infinity}',
    '\f{' + OK + '}',  # Jackson skips only space, tab, CR, LF
    '{' + OK + ',"\\udc00":1}',  # an escaped lone surrogate in a name
    '{' + OK,
])
def test_hostile_json_is_malformed_as_jackson_reads_it(claims):
    with pytest.raises(_Rejected, match="malformed JSON"):
        validate(raw_jws(claims), UnsecuredValidator(), NOW_MS)
    server = OAuthBearerServer(UnsecuredValidator())
    assert server.respond(initial(raw_jws(claims))) == b'{"status":"invalid_token"}'


def test_invalid_utf8_is_malformed():
    claims = base64.urlsafe_b64encode(b'{"sub":"\xff","exp":1}').decode().rstrip("=")
    with pytest.raises(_Rejected, match="malformed JSON"):
        validate(raw_jws("{}").split(".")[0] + "." + claims + ".", UnsecuredValidator(), NOW_MS)


def test_what_jackson_reads_past_the_first_value_and_at_its_limits():
    # Jackson accepts up to 1000 levels; json.loads's recursion stops Ebb some dozens short of that (malformed)
    deepest = '{' + OK + ',"x":' + "[" * 899 + "]" * 899 + "}"
    for claims in (deepest, '{' + OK + '} trailing {[', ' \t\r\n{' + OK + '}}}',
                   '{' + OK + ',"n":1' + "0" * 999 + "}"):  # 1000 digits
        assert validate(raw_jws(claims), UnsecuredValidator(), NOW_MS) == "alice", claims[:40]
    # a huge integer is Java's doubleValue, +-Infinity: never expires, or always has
    assert validate(raw_jws('{"sub":"alice","exp":1' + "0" * 400 + "}"), UnsecuredValidator(), NOW_MS) == "alice"
    with pytest.raises(_Rejected, match="on or after the Expiration Time"):
        validate(raw_jws('{"sub":"alice","exp":-1' + "0" * 400 + "}"), UnsecuredValidator(), NOW_MS)
    with pytest.raises(_Rejected, match="Issued At value was after"):
        validate(raw_jws('{' + OK + ',"iat":1' + "0" * 400 + "}"), UnsecuredValidator(), NOW_MS)
    # a JSON value that is no object (or none) has no members: no exp, and a header without alg
    for claims in ("[1,2]", "null", '"x"', "  "):
        with pytest.raises(_Rejected, match="No expiration time"):
            validate(raw_jws(claims), UnsecuredValidator(), NOW_MS)
    with pytest.raises(AuthenticationFailed):
        OAuthBearerServer(UnsecuredValidator()).respond(initial(raw_jws('{' + OK + '}', header="[1]")))


def test_blank_and_trim_are_javas():
    with pytest.raises(_Rejected, match="No principal name"):  # "\x01" is <= U+0020: Java trims it
        validate(raw_jws(f'{{"sub":"\\u0001","exp":{EXP}}}'), UnsecuredValidator(), NOW_MS)
    for sub in ("\u00a0", "\u2003", " x "):  # not trimmed by Java: a principal, kept as it is
        assert validate(jws({"sub": sub, "exp": EXP}), UnsecuredValidator(), NOW_MS) == sub
    needs = UnsecuredValidator(required_scope=("read",))
    with pytest.raises(_Rejected) as info:
        validate(jws({"sub": "alice", "exp": EXP, "scope": "read\u00a0"}), needs, NOW_MS)
    assert info.value.scope == "[read]"
    for scope in ("\x01read\x1f", ["\x02", " read "]):
        assert validate(jws({"sub": "alice", "exp": EXP, "scope": scope}), needs, NOW_MS) == "alice"
    # an unpaired surrogate is what Java writes for it in UTF-8: "?"
    assert validate(raw_jws(f'{{"sub":"a\\ud800","exp":{EXP}}}'), UnsecuredValidator(), NOW_MS) == "a?"


MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.mark.parametrize("option, value, message", [
    ("unsecuredValidatorAllowableClockSkewMs", "1_000", 'AllowableClockSkewMs: For input string: "1_000"'),
    ("unsecuredValidatorAllowableClockSkewMs", "2147483648", "AllowableClockSkewMs: For input string"),
    ("unsecuredValidatorAllowableClockSkewMs", "1 0", "AllowableClockSkewMs: For input string"),
    ("unsecuredValidatorRequiredScope", "a\tb", "RequiredScope: Invalid scope value: a\tb"),
    ("unsecuredValidatorRequiredScope", "a \u00e9", "RequiredScope: Invalid scope value: \u00e9"),
])
def test_validator_options_kafka_refuses(option, value, message):
    with pytest.raises(ValueError, match=message):
        UnsecuredValidator.from_jaas(parse_jaas_config(f'{MODULE} required {option}="{value}";'))


def test_validator_options_as_java_reads_them():
    entry = parse_jaas_config(f'{MODULE} required unsecuredValidatorAllowableClockSkewMs=" +2147483647 " '
                              f'unsecuredValidatorRequiredScope="  a  b " unsecuredValidatorPrincipalClaimName=" u ";')
    assert UnsecuredValidator.from_jaas(entry) == UnsecuredValidator("u", "scope", ("a", "b"), 2**31 - 1)


@pytest.mark.parametrize("header, readable", [
    ("1 ", True), ("1", True), ("1x", False), ("1}", False),  # after a top-level number: whitespace only
    ("true]", True), ("null\x00", True), ("truex", False), ("false\u00e9", False), ("null_", False),
    ('"none"x', True),  # a string ends at its quote
])
def test_what_may_follow_a_top_level_scalar(header, readable):
    """Jackson reads a scalar at the top as no members (so no alg: the exchange fails), unless what follows
    it could continue the token: then the section is malformed JSON (invalid_token)."""
    server = OAuthBearerServer(UnsecuredValidator())
    message = initial(raw_jws('{' + OK + '}', header=header))
    if readable:
        with pytest.raises(AuthenticationFailed):
            server.respond(message)
    else:
        assert server.respond(message) == b'{"status":"invalid_token"}'
