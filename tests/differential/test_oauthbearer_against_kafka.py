"""Kafka as the judge of SASL OAUTHBEARER with its default, unsecured validator: Kafka 4.3.1 and Ebb, the
client listener speaking SASL_PLAINTEXT with OAUTHBEARER only, answer the same handshakes and tokens the
same way: accepted tokens (with extensions, with the matching authzid), and the rejected ones (expired,
signed, without exp or sub, iat in the future, Base64 rather than Base64URL: the invalid_token challenge,
then SASL_AUTHENTICATION_FAILED carrying it), messages that are no initial response, a wrong authzid,
hostile JSON (deep nesting, huge numbers, NaN, trailing bytes) and Java's notion of a blank principal.
Error messages are compared word for word."""

from __future__ import annotations

import base64
import time

import pytest

from protocol import messages as m
from tests.broker.wire_client import WireClient
from tests.differential.runner import Peer, compare
from tests.support.oauthbearer_tokens import initial, jws, raw_jws

pytestmark = pytest.mark.timeout(300)
JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
        'unsecuredLoginStringClaim_sub="admin";')


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",  # Kafka's own broker logs in with the JAAS entry
        "listener.name.plaintext.oauthbearer.sasl.jaas.config": JAAS,
    }


# Kafka 4.3.1 accepts this token (exp reads as Infinity, a Long.MAX_VALUE lifetime), then fails on its own
# arithmetic converting that lifetime to nanoseconds ("long overflow") and closes the connection unanswered.
# Ebb accepts the token and answers; the test checks only the first answer, which Kafka never gives.
INFINITE = "exp a 400-digit integer (Infinity)"


def tokens() -> dict[str, bytes]:
    now = int(time.time())
    good = {"sub": "alice", "exp": now + 3600, "iat": now - 5}
    ok = f'{{"sub":"alice","exp":{now + 3600}'  # an object's text, left open for more members
    # ">>>???" encodes to "-" and "_" at one of three alignments: a token only Base64URL reads
    urlsafe = next(jws(c) for c in ({**good, "n": "x" * pad + ">>>???"} for pad in range(3))
                   if "-" in jws(c) and "_" in jws(c))
    return {
        "good": initial(jws(good)),
        "good, Base64URL letters": initial(urlsafe),
        "good, padded": initial(".".join(p + "=" * (-len(p) % 4) for p in jws(good).split(".")[:2]) + "."),
        "good, with extensions": initial(jws(good), extensions="traceId=abc 1\x01"),
        "good, its own authzid": initial(jws(good), authzid="alice"),
        "another authzid": initial(jws(good), authzid="bob"),
        "expired": initial(jws({**good, "exp": now - 60, "iat": now - 120})),
        "signed": initial(jws(good, header={"alg": "HS256"}, signature="c2ln")),
        "alg HS256": initial(jws(good, header={"alg": "HS256"})),
        "no exp": initial(jws({"sub": "alice"})),
        "exp not a number": initial(jws({**good, "exp": "later"})),
        "no sub": initial(jws({"exp": now + 3600})),
        "iat in the future": initial(jws({**good, "iat": now + 600})),
        "Base64, not Base64URL": initial(jws(good, encode=base64.b64encode).replace("e", "+", 1)),
        "two sections": initial("e30.e30"),
        "not JSON": initial("bm90IGpzb24.e30."),
        "no separator after the header": b"n,,auth=Bearer " + jws(good).encode() + b"\x01\x01",
        "scheme Basic": f"n,,\x01auth=Basic {jws(good)}\x01\x01".encode(),
        "no auth": b"n,,\x01traceId=x\x01\x01",
        # hostile JSON, as Jackson (readTree) reads it
        "nested 100000 deep": initial(raw_jws(f'{ok},"x":' + "[" * 100_000 + "}")),
        "nested 1001 deep": initial(raw_jws(f'{ok},"x":' + "[" * 1000 + "]" * 1000 + "}")),
        INFINITE: initial(raw_jws('{"sub":"alice","exp":1' + "0" * 400 + "}")),
        "exp a negative 400-digit integer": initial(raw_jws('{"sub":"alice","exp":-1' + "0" * 400 + "}")),
        "exp 1001 digits": initial(raw_jws('{"sub":"alice","exp":1' + "0" * 1000 + "}")),
        "exp NaN": initial(raw_jws('{"sub":"alice","exp":NaN}')),
        "exp Infinity": initial(raw_jws('{"sub":"alice","exp":Infinity}')),
        "good, trailing bytes after the object": initial(raw_jws(f"{ok}}} trailing {{[")),
        "claims an array": initial(raw_jws("[1,2]")),
        "form feed before the object": initial(raw_jws(f"\f{ok}}}")),
        "invalid UTF-8": initial(raw_jws("{}").split(".")[0] + "."
                                 + base64.urlsafe_b64encode(b'{"sub":"\xff","exp":1}').decode().rstrip("=") + "."),
        # Java's trim/isBlank: only characters <= U+0020 are blank
        "sub U+0001": initial(raw_jws(f'{{"sub":"\\u0001","exp":{now + 3600}}}')),
        "good, sub U+00A0": initial(jws({**good, "sub": "\u00a0"})),
    }


def text(peer: Peer, label: str, answer) -> None:
    """The error message word for word (the runner keeps only whether there is one)."""
    peer.answers.append((f"{label}: message text", {"error_message": answer.error_message}))


def oauthbearer_tokens(peer: Peer) -> None:
    for label, token in tokens().items():
        with WireClient(peer.port, timeout=30) as client:
            peer.record(f"{label}: handshake", client.send(m.SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1))
            try:
                answer = peer.record(f"{label}: token", client.send(m.SaslAuthenticateRequest(auth_bytes=token), 2))
            except ConnectionError:
                peer.answers.append((f"{label}: token", {"connection": "closed without an answer"}))
                peer.answers.append((f"{label}: token: message text", {"error_message": None}))
                peer.answers.append((f"{label}: token: lifetime in minutes", {"minutes": None}))
                continue
            text(peer, f"{label}: token", answer)
            # KIP-368: the token's remaining life (an hour here), to the minute: the two answer moments apart
            peer.answers.append((f"{label}: token: lifetime in minutes",
                                 {"minutes": round(answer.session_lifetime_ms / 60_000)}))
            if answer.error_code == 0 and answer.auth_bytes:  # the error challenge: the client answers ^A
                final = peer.record(f"{label}: ^A", client.send(m.SaslAuthenticateRequest(auth_bytes=b"\x01"), 2))
                text(peer, f"{label}: ^A", final)
            elif answer.error_code == 0 and label != INFINITE:
                peer.record(f"{label}: then ApiVersions", client.send(m.ApiVersionsRequest(), 0))


def allowed() -> dict[tuple[str, str], str]:
    lifetime = ("the token's remaining lifetime (KIP-368) in ms, which depends on the moment each answered; "
                "compared to the minute below")
    result = {(f"{label}: token", "session_lifetime_ms"): lifetime for label in tokens() if label.startswith("good")}
    result[(f"{INFINITE}: token: lifetime in minutes", "minutes")] = "Kafka fails on its own lifetime arithmetic"
    # Kafka 4.3.1's OAuthBearerClientInitialResponse words this refusal with a group of the wrong matcher
    # ("scheme" is not in the outer pattern): an IllegalArgumentException, and the connection closes unanswered.
    # Ebb answers SASL_AUTHENTICATION_FAILED with the text Kafka gives every unreadable first message.
    for path in ("connection", "error_code", "error_message", "auth_bytes", "session_lifetime_ms"):
        result[("scheme Basic: token", path)] = "Kafka fails on its own message (above)"
    result[("scheme Basic: token: message text", "error_message")] = "the same"
    result[("scheme Basic: token: lifetime in minutes", "minutes")] = "the same"
    for path in ("connection", "error_code", "error_message", "auth_bytes", "session_lifetime_ms"):
        result[(f"{INFINITE}: token", path)] = "Kafka fails on its own lifetime arithmetic (INFINITE above)"
    result[(f"{INFINITE}: token: message text", "error_message")] = "the same"
    return result


def test_oauthbearer_tokens_as_kafka_judges_them(ebb_peer, kafka_peer):
    found = compare(oauthbearer_tokens, ebb_peer, kafka_peer, allowed(),
                    ignore=lambda path: path.startswith("api_keys"))  # the APIs each serves: not the point here
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
