"""SASL on a SASL_PLAINTEXT listener beside a PLAINTEXT one: PLAIN users from the listener's JAAS entry,
SCRAM-SHA-256/512 users created with AlterUserScramCredentials, four real clients, wrong passwords,
requests before authentication, bad tokens, and each listener advertising itself."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from protocol.errors import ErrorCode
from protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from tests.broker.data_wire import batch, produce_request
from tests.broker.wire_client import WireClient, metadata
from tests.support.broker_process import BrokerProcess, free_port

pytestmark = pytest.mark.timeout(120)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
JS_DIR = Path(__file__).parents[1] / "conformance" / "js"
SCRAM_USERS = {"SCRAM-SHA-256": ("carol", "carol-secret"), "SCRAM-SHA-512": ("bob", "bob-secret")}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    sasl_port = free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("sasl"))
    process.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "ebb.sasl.authentication.timeout.ms": "3000",
    })
    process.sasl_port = sasl_port
    with process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        mechanisms = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
        upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanisms[m], 8192), password.encode())
                   for m, (user, password) in SCRAM_USERS.items()]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=10)
        yield process


def credentials(mechanism: str) -> tuple[str, str]:
    return ("alice", "alice-secret") if mechanism == "PLAIN" else SCRAM_USERS[mechanism]


MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_authenticates(broker, mechanism):
    user, password = credentials(mechanism)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    delivered = []
    producer.produce("sasl-confluent", b"v", on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    producer.flush(20)
    assert len(delivered) == 1 and delivered[0][0] is None
    assert f"\"principal\": \"User:{user}\"" in broker.log_text()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_authenticates(broker, mechanism):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    user, password = credentials(mechanism)
    options = dict(bootstrap_servers=f"127.0.0.1:{broker.sasl_port}", security_protocol="SASL_PLAINTEXT",
                   sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    producer = KafkaProducer(**options)
    sent = producer.send("sasl-kafka-python", b"record").get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(**options, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("sasl-kafka-python", 0)])
    consumer.seek(TopicPartition("sasl-kafka-python", 0), sent.offset)
    assert next(iter(consumer)).value == b"record"
    consumer.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_authenticates(broker, mechanism):
    from aiokafka import AIOKafkaProducer

    user, password = credentials(mechanism)

    async def produce():
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.sasl_port}",
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                                    sasl_plain_username=user, sasl_plain_password=password)
        await producer.start()
        try:
            return await producer.send_and_wait("sasl-aiokafka", b"v")
        finally:
            await producer.stop()

    assert asyncio.run(produce()).offset >= 0


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafkajs_authenticates_and_is_told_the_sasl_endpoint(broker, mechanism):
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "kafkajs").exists():
        pytest.fail("node and kafkajs are needed: `make test` installs them")
    user, password = credentials(mechanism)
    out = subprocess.run([node, "sasl.js", f"127.0.0.1:{broker.sasl_port}", mechanism, user, password, "sasl-js"],
                         capture_output=True, text=True, timeout=30, cwd=JS_DIR)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ok"], result
    assert result["brokers"] == [f"127.0.0.1:{broker.sasl_port}"]  # the SASL listener, not the PLAINTEXT one


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_is_an_authentication_error_in_the_client(broker, mechanism):
    from confluent_kafka import KafkaError

    user, _ = credentials(mechanism)
    errors = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": "wrong",
                         "error_cb": errors.append})
    for _ in range(50):
        producer.poll(0.1)
        if errors:
            break
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed" in errors[0].str()


def _authenticate(client: WireClient, mechanism: str, *tokens: bytes) -> list:
    answer = client.send(SaslHandshakeRequest(mechanism=mechanism), version=1)
    assert answer.error_code == ErrorCode.NONE
    return [client.send(SaslAuthenticateRequest(auth_bytes=token), version=2) for token in tokens]


def test_plain_over_raw_frames_and_per_listener_metadata(broker):
    with WireClient(broker.sasl_port) as client:
        [answer] = _authenticate(client, "PLAIN", b"\x00alice\x00alice-secret")
        assert answer.error_code == ErrorCode.NONE and answer.auth_bytes == b""
        brokers = metadata(client, None).brokers
        assert [(b.host, b.port) for b in brokers] == [("127.0.0.1", broker.sasl_port)]
    with WireClient(broker.port) as client:
        assert [b.port for b in metadata(client, None).brokers] == [broker.port]


def test_bad_credentials_are_answered_then_the_connection_closes(broker):
    with WireClient(broker.sasl_port) as client:
        [answer] = _authenticate(client, "PLAIN", b"\x00alice\x00nope")
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: Invalid username or password"
        with pytest.raises(ConnectionError):
            metadata(client, None)
    with WireClient(broker.sasl_port) as client:
        [answer] = _authenticate(client, "SCRAM-SHA-512", b"this is not scram")
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    with WireClient(broker.sasl_port) as client:  # an unknown user fails at the proof, like a wrong password
        [first] = _authenticate(client, "SCRAM-SHA-256", b"n,,n=nobody,r=abc")
        assert first.error_code == ErrorCode.NONE and first.auth_bytes.startswith(b"r=abc")
        nonce = first.auth_bytes.decode().split(",")[0][2:]
        final = client.send(SaslAuthenticateRequest(auth_bytes=f"c=biws,r={nonce},p=AAAA".encode()), version=2)
        assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_requests_before_authentication_close_only_that_connection(broker):
    with WireClient(broker.sasl_port) as client:
        with pytest.raises(ConnectionError):
            metadata(client, None)
    with WireClient(broker.sasl_port) as client:  # SaslAuthenticate before the handshake
        with pytest.raises(ConnectionError):
            client.send(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret"), version=2)
    with WireClient(broker.port) as client:
        assert metadata(client, None).brokers


def test_unsupported_mechanism_lists_the_offered_ones_and_closes(broker):
    with WireClient(broker.sasl_port) as client:
        answer = client.send(SaslHandshakeRequest(mechanism="GSSAPI"), version=1)
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == MECHANISMS
        with pytest.raises(ConnectionError):
            metadata(client, None)


def test_sasl_requests_on_a_plaintext_listener_are_illegal_state(broker):
    with WireClient(broker.port) as client:
        assert client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=1).error_code == \
            ErrorCode.ILLEGAL_SASL_STATE
        answer = client.send(SaslAuthenticateRequest(auth_bytes=b""), version=1)
        assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert metadata(client, None).brokers  # the connection stays usable


def test_handshake_v0_then_bare_tokens(broker):
    """KIP-43: after a v0 handshake the tokens travel as bare size-prefixed frames."""
    with WireClient(broker.sasl_port) as client:
        assert client.send(SaslHandshakeRequest(mechanism="PLAIN"), version=0).error_code == ErrorCode.NONE
        token = b"\x00alice\x00alice-secret"
        client.sock.sendall(len(token).to_bytes(4, "big") + token)
        assert client.read_frame() == b""
        assert metadata(client, None).brokers


def _scram_proof(mechanism: str, password: str, client_first_bare: str, server_first: str,
                 without_proof: str) -> str:
    name = "sha256" if mechanism.endswith("256") else "sha512"
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", name).digest()
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.new(name, client_key).digest(), auth_message, name).digest()
    return base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()


def test_scram_exchange_by_hand_checks_the_server_signature(broker):
    """RFC 5802 written out in the test: the broker's final message proves it holds the credential."""
    user, password = SCRAM_USERS["SCRAM-SHA-512"]
    with WireClient(broker.sasl_port) as client:
        client_first_bare = f"n={user},r=clientnonce"
        [first] = _authenticate(client, "SCRAM-SHA-512", f"n,,{client_first_bare}".encode())
        server_first = first.auth_bytes.decode()
        nonce = server_first.split(",")[0][2:]
        assert nonce.startswith("clientnonce") and len(nonce) > len("clientnonce") + 16
        without_proof = f"c=biws,r={nonce}"
        proof = _scram_proof("SCRAM-SHA-512", password, client_first_bare, server_first, without_proof)
        final = client.send(SaslAuthenticateRequest(auth_bytes=f"{without_proof},p={proof}".encode()), version=2)
        assert final.error_code == ErrorCode.NONE
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        salted = hashlib.pbkdf2_hmac("sha512", password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
        server_key = hmac.new(salted, b"Server Key", "sha512").digest()
        expected = hmac.new(server_key, f"{client_first_bare},{server_first},{without_proof}".encode(),
                            "sha512").digest()
        assert final.auth_bytes == b"v=" + base64.b64encode(expected)
        assert fields["i"] == "8192"


def test_scram_credential_admin_errors(broker):
    request = AlterUserScramCredentialsRequest
    with WireClient(broker.port) as client:
        answer = client.send(request(deletions=[request.ScramCredentialDeletion(name="ghost", mechanism=1)],
                                     upsertions=[
            request.ScramCredentialUpsertion(name="weak", mechanism=2, iterations=100, salt=b"s",
                                             salted_password=b"p"),
            request.ScramCredentialUpsertion(name="twice", mechanism=1, iterations=4096, salt=b"s",
                                             salted_password=b"p"),
            request.ScramCredentialUpsertion(name="twice", mechanism=1, iterations=4096, salt=b"s",
                                             salted_password=b"p"),
            request.ScramCredentialUpsertion(name="odd", mechanism=7, iterations=4096, salt=b"s",
                                             salted_password=b"p"),
        ]), version=0)
        errors = {r.user: r.error_code for r in answer.results}
        assert errors == {"ghost": ErrorCode.RESOURCE_NOT_FOUND, "weak": ErrorCode.UNACCEPTABLE_CREDENTIAL,
                          "twice": ErrorCode.DUPLICATE_RESOURCE, "odd": ErrorCode.UNSUPPORTED_SASL_MECHANISM}
        described = client.send(DescribeUserScramCredentialsRequest(users=None), version=0)
        by_user = {r.user: sorted((c.mechanism, c.iterations) for c in r.credential_infos) for r in described.results}
        assert by_user == {"bob": [(2, 8192)], "carol": [(1, 8192)]}
        named = client.send(DescribeUserScramCredentialsRequest(users=[
            DescribeUserScramCredentialsRequest.UserName(name="bob"),
            DescribeUserScramCredentialsRequest.UserName(name="nobody")]), version=0)
        assert {r.user: r.error_code for r in named.results} == {"bob": 0, "nobody": ErrorCode.RESOURCE_NOT_FOUND}


def test_deleted_credentials_no_longer_authenticate(broker):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion("dave", info, b"d")]).values():
        future.result(timeout=10)
    options = dict(bootstrap_servers=f"127.0.0.1:{broker.sasl_port}", security_protocol="SASL_PLAINTEXT",
                   sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="dave", sasl_plain_password="d",
                   max_block_ms=5000, bootstrap_timeout_ms=5000)
    KafkaProducer(**options).close()
    from confluent_kafka.admin import UserScramCredentialDeletion
    for future in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)]).values():
        future.result(timeout=10)
    with pytest.raises(KafkaError):
        KafkaProducer(**options)


def test_ebb_users_cli_sets_lists_and_deletes(broker):
    """`ebb users` salts the password itself; a kafka-python client then authenticates with it."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    def ebb(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        import sys
        return subprocess.run([sys.executable, "-m", "broker.cli", *args, "--bootstrap-server", broker.bootstrap],
                              input=stdin, capture_output=True, text=True, timeout=30)

    out = ebb("users", "set", "erin", "--mechanism", "SCRAM-SHA-256", "--iterations", "5000", stdin="erin-pw\n")
    assert out.returncode == 0, out.stderr
    listed = ebb("users", "list", "erin", "--output", "json")
    assert json.loads(listed.stdout) == {"users": [{"user": "erin", "credentials": [
        {"mechanism": "SCRAM-SHA-256", "iterations": 5000}]}]}
    options = dict(bootstrap_servers=f"127.0.0.1:{broker.sasl_port}", security_protocol="SASL_PLAINTEXT",
                   sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="erin", sasl_plain_password="erin-pw",
                   max_block_ms=5000, bootstrap_timeout_ms=5000)
    KafkaProducer(**options).close()
    assert ebb("users", "delete", "erin", "--mechanism", "SCRAM-SHA-256").returncode == 0
    with pytest.raises(KafkaError):
        KafkaProducer(**options)
    missing = ebb("users", "delete", "erin", "--mechanism", "SCRAM-SHA-256")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    weak = ebb("users", "set", "frank", "--iterations", "10", stdin="pw\n")
    assert weak.returncode == 1 and "iterations" in weak.stderr.lower()
    assert ebb("users", "set", "frank").returncode == 2  # no password on stdin


def test_a_client_that_never_authenticates_is_closed_and_others_go_on(broker):
    import socket
    import time

    idle = socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=10)
    started = time.monotonic()
    with WireClient(broker.sasl_port) as client:  # meanwhile another client authenticates and works
        _authenticate(client, "PLAIN", b"\x00alice\x00alice-secret")
        assert metadata(client, None).brokers
    assert idle.recv(1) == b""  # closed by the broker at ebb.sasl.authentication.timeout.ms
    assert time.monotonic() - started >= 2.5
    idle.close()


def test_an_oversized_frame_before_authentication_closes_the_connection(broker):
    with WireClient(broker.sasl_port) as client:
        client.sock.sendall((600_000).to_bytes(4, "big") + b"\x00" * 1024)  # above sasl.server.max.receive.size
        assert client.sock.recv(1) == b""
    with WireClient(broker.sasl_port) as client:  # after authentication, large requests are fine again
        _authenticate(client, "PLAIN", b"\x00alice\x00alice-secret")
        metadata(client, ["sasl-big"], allow_auto_topic_creation=True)
        answer = client.send(produce_request("sasl-big", 0, batch([b"x" * 700_000])), version=9)
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
