"""Kafka as the judge of KIP-368 (SASL re-authentication): Kafka 4.3.1 and Ebb, the client listener
speaking SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and OAUTHBEARER, connections.max.reauth.ms 3 s for
the listener and 60 s for OAUTHBEARER (its mechanism-prefixed form), answer the same way: the
SessionLifetimeMs of each mechanism (OAUTHBEARER's capped by a token expiring before the maximum), a
re-authentication on the same connection and one tried again within a second, a changed principal and
a changed mechanism refused, and what a connection whose session has expired may still do: a request
closes it unanswered, a re-authentication revives it, and a long-poll Fetch that was in flight when it
expired is answered before the next request closes it; and the properties described, and refused as
dynamic configs. Error messages are compared word for word."""

from __future__ import annotations

import hashlib
import secrets
import time

import pytest

from client.security import ClientSecurity, SaslClient
from protocol import messages as m
from tests.broker.data_wire import fetch_request
from tests.broker.wire_client import WireClient, create_topic
from tests.differential.runner import Peer, compare
from tests.support.oauthbearer_tokens import initial, jws
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
              f'password="{USERS["admin"]}" ' + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredLoginStringClaim_sub="admin";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
MAX_MS, OAUTH_MAX_MS = 3000, 60_000
TOPIC = "reauth"


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "connections.max.reauth.ms": str(MAX_MS),
        "listener.name.plaintext.oauthbearer.connections.max.reauth.ms": str(OAUTH_MAX_MS),
        "transaction.partition.verification.enable": "false",
    }


class Session:
    """One connection of a peer; every answer recorded under `label` (messages word for word, lifetimes
    that depend on the moment rounded to the second), a close instead of an answer recorded as such."""

    def __init__(self, peer: Peer, label: str):
        self.peer, self.label, self.client = peer, label, WireClient(peer.port, timeout=30)

    def ask(self, step: str, body, version: int, opaque: bool = False):
        label = f"{self.label}: {step}"
        try:
            answer = self.client.send(body, version)
        except ConnectionError:
            self.peer.answers.append((label, {"connection": "closed without an answer"}))
            return None
        entry = self.peer.record(label, answer) and self.peer.answers[-1][1]
        if "session_lifetime_ms" in entry:  # exact for a maximum; a token's remaining life, to the second
            entry["session_lifetime_ms"] = round(answer.session_lifetime_ms / 1000)
        if opaque and entry.get("auth_bytes"):  # SCRAM's nonces and salts are each broker's own
            entry["auth_bytes"] = "<SCRAM message>"
        if "error_message" in entry:
            self.peer.answers.append((f"{label}: message text", {"error_message": answer.error_message}))
        return answer

    def login(self, mechanism: str, user: str, step: str = "login", token: bytes | None = None):
        """SaslHandshake then SaslAuthenticate (v2) rounds; the last answer, or None if closed."""
        if self.ask(f"{step}: handshake {mechanism}", m.SaslHandshakeRequest(mechanism=mechanism), 1) is None:
            return None
        if mechanism == "OAUTHBEARER":
            assert token is not None
            return self.ask(f"{step}: token", m.SaslAuthenticateRequest(auth_bytes=token), 2)
        password = SCRAM_PASSWORD if mechanism.startswith("SCRAM") else USERS.get(user, "nope")
        sasl = SaslClient(ClientSecurity(sasl_mechanism=mechanism, username=user, password=password))
        scram = mechanism.startswith("SCRAM")
        answer = self.ask(f"{step}: first", m.SaslAuthenticateRequest(auth_bytes=sasl.first()), 2, scram)
        if scram and answer is not None and answer.error_code == 0:
            answer = self.ask(f"{step}: final",
                              m.SaslAuthenticateRequest(auth_bytes=sasl.answer(bytes(answer.auth_bytes))), 2, True)
        return answer

    def close(self) -> None:
        self.client.close()


def prepare(peer: Peer) -> None:
    """A SCRAM user and a topic, made over an admin PLAIN session (unrecorded)."""
    admin = WireClient(peer.port, timeout=30)
    assert admin.send(m.SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    assert admin.send(m.SaslAuthenticateRequest(auth_bytes=b"\0admin\0admin-secret"), 2).error_code == 0
    salt = secrets.token_bytes(32)
    upsert = m.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=SCRAM_USER, mechanism=1, iterations=4096, salt=salt,
        salted_password=hashlib.pbkdf2_hmac("sha256", SCRAM_PASSWORD.encode(), salt, 4096))
    result = admin.send(m.AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsert]), 0).results[0]
    assert result.error_code == 0, result
    assert create_topic(admin, TOPIC).error_code in (0, 36)

    def led() -> bool:  # Kafka answers CreateTopics before it serves the partition
        found = admin.send(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)]), 12)
        return found.topics[0].error_code == 0 and found.topics[0].partitions[0].leader_id >= 0
    wait_for(led, timeout_s=30, what=f"{peer.name}: a leader for {TOPIC}")
    admin.close()

    def scram_works() -> bool:  # Kafka's controller publishes the credential a moment later
        with WireClient(peer.port, timeout=30) as probe:
            assert probe.send(m.SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1).error_code == 0
            sasl = SaslClient(ClientSecurity(sasl_mechanism="SCRAM-SHA-256", username=SCRAM_USER,
                                             password=SCRAM_PASSWORD))
            first = probe.send(m.SaslAuthenticateRequest(auth_bytes=sasl.first()), 2)
            if first.error_code:
                return False
            final = sasl.answer(bytes(first.auth_bytes))
            return probe.send(m.SaslAuthenticateRequest(auth_bytes=final), 2).error_code == 0
    wait_for(scram_works, timeout_s=30, what=f"{peer.name}: the SCRAM credential")


def token(lifetime_s: float) -> bytes:
    """A token with this long to live and a quarter second more, so that the answer, rounded to the
    second, is `lifetime_s` whether it comes at once or up to 0.75 s later (half a second more put an
    answer within a millisecond on the rounding edge: 21 on one broker, 20 on the other)."""
    now = time.time()
    return initial(jws({"sub": "alice", "exp": now + lifetime_s + 0.25, "iat": int(now) - 1}))


def lifetimes(peer: Peer) -> None:
    for name, mechanism, user, credential in (
            ("PLAIN", "PLAIN", "alice", None), ("SCRAM", "SCRAM-SHA-256", SCRAM_USER, None),
            ("OAUTHBEARER, the maximum first", "OAUTHBEARER", "alice", token(3600)),
            ("OAUTHBEARER, the token first", "OAUTHBEARER", "alice", token(20)),
            ("OAUTHBEARER, expired", "OAUTHBEARER", "alice", token(-60))):
        session = Session(peer, name)
        answer = session.login(mechanism, user, token=credential)
        if answer is not None and answer.error_code == 0 and answer.auth_bytes and mechanism == "OAUTHBEARER":
            session.ask("^A", m.SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)  # the refused token's last step
        session.ask("then ApiVersions", m.ApiVersionsRequest(), 0)
        session.close()


def reauthentication(peer: Peer) -> None:
    for mechanism, user in (("PLAIN", "alice"), ("SCRAM-SHA-256", SCRAM_USER)):
        session = Session(peer, f"re-authenticate {mechanism}")
        session.login(mechanism, user)
        session.ask("served", m.ApiVersionsRequest(), 0)
        session.login(mechanism, user, "again")  # the first re-authentication may come at once
        session.ask("served after", m.ApiVersionsRequest(), 0)
        # within a second of the last: an ordinary SaslHandshake, refused as out of state; the session goes on
        session.ask("too soon: handshake", m.SaslHandshakeRequest(mechanism=mechanism), 1)
        session.ask("served still", m.ApiVersionsRequest(), 0)
        session.close()
    session = Session(peer, "re-authenticate OAUTHBEARER")
    session.login("OAUTHBEARER", "alice", token=token(3600))
    session.login("OAUTHBEARER", "alice", "again", token=token(20))
    session.ask("served after", m.ApiVersionsRequest(), 0)
    session.close()


def refusals(peer: Peer) -> None:
    session = Session(peer, "another principal")
    session.login("PLAIN", "alice")
    session.login("PLAIN", "bob", "as bob")
    session.ask("then ApiVersions", m.ApiVersionsRequest(), 0)
    session.close()
    session = Session(peer, "another mechanism")
    session.login("PLAIN", "alice")
    session.login("SCRAM-SHA-256", SCRAM_USER, "with SCRAM")
    session.ask("then ApiVersions", m.ApiVersionsRequest(), 0)
    session.close()
    session = Session(peer, "bad password")
    session.login("PLAIN", "alice")
    session.ask("again: handshake", m.SaslHandshakeRequest(mechanism="PLAIN"), 1)
    session.ask("again: wrong password", m.SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"), 2)
    session.close()
    session = Session(peer, "unknown mechanism")
    session.login("PLAIN", "alice")
    session.ask("again: handshake", m.SaslHandshakeRequest(mechanism="GSSAPI"), 1)
    session.ask("then ApiVersions", m.ApiVersionsRequest(), 0)
    session.close()
    session = Session(peer, "another request mid-way")
    session.login("OAUTHBEARER", "alice", token=token(3600))
    session.ask("again: handshake", m.SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1)
    session.ask("ApiVersions", m.ApiVersionsRequest(), 0)
    session.ask("then ApiVersions", m.ApiVersionsRequest(), 0)
    session.close()


def expiry(peer: Peer) -> None:
    idle, revived, polling = (Session(peer, name) for name in ("expired", "revived", "in flight"))
    for session in (idle, revived, polling):
        session.login("PLAIN", "alice")
    ends = time.monotonic() + MAX_MS / 1000
    # a Fetch waiting 4.5 s for data that never comes: it outlives the session, and is answered
    fetch = fetch_request(TOPIC, 0, 0, max_wait_ms=4500)
    polling.ask("long poll across the expiry", fetch, 11)
    time.sleep(max(0.0, ends + 0.3 - time.monotonic()))  # the session's end is a time, not an event
    polling.ask("then ApiVersions", m.ApiVersionsRequest(), 0)
    idle.ask("then Metadata", m.MetadataRequest(topics=[]), 12)
    revived.login("PLAIN", "alice", "after expiry")
    revived.ask("served after", m.MetadataRequest(topics=[]), 12)
    for session in (idle, revived, polling):
        session.close()


# Kafka answers a request other than SaslAuthenticate in the middle of an authentication with that API's error
# response (ILLEGAL_SASL_STATE) before it closes; Ebb closes without it, in a first authentication as in a
# re-authentication (it has no error response for every API). Either way the connection ends there.
MID_WAY = "Kafka answers ILLEGAL_SASL_STATE before closing; Ebb closes unanswered (see above)"
ALLOWED = {("described: DescribeConfigs", "results[0].error_message"):
           "a message with NONE: whether one is given is free (test_against_kafka allows it everywhere)",
           **{("another request mid-way: ApiVersions", path): MID_WAY
           for path in ("connection", "error_code", "finalized_features", "finalized_features_epoch",
                        "supported_features", "throttle_time_ms", "zk_migration_ready", "api_keys")}}


def described(peer: Peer) -> None:
    """The properties as DescribeConfigs lists them: the listener's mechanism value, the broker's, synonyms."""
    session = Session(peer, "described")
    session.login("PLAIN", "alice")
    node = session.client.send(m.MetadataRequest(topics=[]), 12).brokers[0].node_id
    keys = ["connections.max.reauth.ms", "listener.name.plaintext.oauthbearer.connections.max.reauth.ms"]
    resource = m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name=str(node),
                                                                configuration_keys=keys)
    session.ask("DescribeConfigs", m.DescribeConfigsRequest(resources=[resource], include_synonyms=True), 4)
    alter = m.IncrementalAlterConfigsRequest.AlterConfigsResource
    for name in (str(node), ""):  # static in Kafka: refused for the broker and the cluster default alike
        change = alter(resource_type=4, resource_name=name, configs=[alter.AlterableConfig(
            name="connections.max.reauth.ms", config_operation=0, value="5000")])
        label = f"altered on {name or 'the default'}"
        answer = session.ask(label, m.IncrementalAlterConfigsRequest(resources=[change], validate_only=True), 1)
        peer.answers.append((f"{label}: message text", {"error_message": answer.responses[0].error_message}))
    session.close()


def test_reauthentication_as_kafka_serves_it(ebb_peer, kafka_peer):
    for peer in (kafka_peer, ebb_peer):
        prepare(peer)
    found = []
    for scenario in (lifetimes, reauthentication, refusals, expiry, described):
        found += compare(scenario, ebb_peer, kafka_peer, ALLOWED,
                         ignore=lambda path: path.startswith(("api_keys",)))
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
