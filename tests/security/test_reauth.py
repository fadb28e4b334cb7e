"""KIP-368 on Ebb alone, where Kafka is no judge: Ebb's own bound on finishing a re-authentication
(ebb.sasl.authentication.timeout.ms, as for the first one), a SaslAuthenticate v0 client's session
expiring all the same (v0 cannot carry the lifetime; Kafka expires it too), and the property described."""

from __future__ import annotations

import asyncio
import time

import pytest

from protocol.messages import (
    ApiVersionsRequest,
    DescribeConfigsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from tests.broker.wire_client import WireClient
from tests.support.broker_process import BrokerProcess, with_plain_sasl_listener

pytestmark = pytest.mark.timeout(120)
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
TOKEN = b"\0alice\0alice-secret"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("reauth"))
    with_plain_sasl_listener(process, JAAS, {"listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "1500",
                                             "ebb.sasl.authentication.timeout.ms": "1000"})
    with process:
        yield process


def login(broker: BrokerProcess, version: int = 2) -> tuple[WireClient, int]:
    client = WireClient(broker.sasl_port, timeout=10)
    assert client.send(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    answer = client.send(SaslAuthenticateRequest(auth_bytes=TOKEN), version)
    assert answer.error_code == 0
    return client, answer.session_lifetime_ms


def closed(client: WireClient) -> bool:
    """Blocks until the broker closes the connection (True) or 10 s pass with it open (False)."""
    try:
        return client.sock.recv(1) == b""
    except TimeoutError:
        return False


def test_a_re_authentication_left_unfinished_is_closed(broker):
    client, lifetime = login(broker)
    assert lifetime == 1500
    assert client.send(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0  # begun, never finished
    started = time.monotonic()
    assert closed(client)
    assert time.monotonic() - started < 5  # the 1 s bound, not the 10 s wait
    client.close()


def test_a_v0_session_expires_though_it_was_not_told(broker):
    client, lifetime = login(broker, version=0)
    assert lifetime == 0  # v0 has no field for it
    assert client.send(ApiVersionsRequest(), 0).error_code == 0
    time.sleep(1.6)  # the session's end is a time, not an event
    with pytest.raises(ConnectionError):
        client.send(ApiVersionsRequest(), 0)
    client.close()


def test_the_properties_are_described_as_kafka_lists_them(broker):
    """The broker's default (read-only: not dynamic in Kafka), the mechanism's value with its synonyms."""
    prefixed = "listener.name.sasl_plaintext.plain.connections.max.reauth.ms"
    with WireClient(broker.port) as client:
        resource = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=4, resource_name="1", configuration_keys=["connections.max.reauth.ms", prefixed])
        described = client.send(DescribeConfigsRequest(resources=[resource], include_synonyms=True), 4).results[0]
    found = {c.name: (c.value, c.read_only, [s.name for s in c.synonyms]) for c in described.configs}
    assert found == {"connections.max.reauth.ms": ("0", True, ["connections.max.reauth.ms"]),
                     prefixed: ("1500", True, [prefixed, "connections.max.reauth.ms"])}


def test_ebbs_own_client_retires_its_connections_before_the_session_ends(broker):
    """Ebb's client (the brokers' fetchers and coordinators use it too) opens a fresh connection before a
    session's lifetime is over, rather than sending on an expired one: requests for 4 s, over 1.5 s
    sessions, none refused and no connection closed by the broker as expired."""
    from client.admin import Admin
    from client.connection import BrokerConnection
    from client.security import ClientSecurity

    security = ClientSecurity(sasl_mechanism="PLAIN", username="alice", password="alice-secret")

    async def run() -> set[BrokerConnection]:
        seen = set()
        async with Admin(f"127.0.0.1:{broker.sasl_port}", security=security) as admin:
            ends = time.monotonic() + 4
            while time.monotonic() < ends:
                connection = await admin.cluster.any_connection()
                seen.add(connection)
                await connection.request(ApiVersionsRequest(), version=0)
                await asyncio.sleep(0.05)
        return seen

    logged_before = len(broker.log_path.read_text(errors="replace"))
    used = asyncio.run(run())
    assert len(used) >= 3  # each retired within 85-95% of its 1.5 s
    assert "SASL session expired" not in broker.log_path.read_text(errors="replace")[logged_before:]


def test_an_idle_connection_closes_itself_when_it_retires(broker):
    """A retired connection callers have replaced (and so never use again) is closed at its retirement,
    not left open for good on both ends."""
    from client.connection import RETIRED, BrokerConnection
    from client.security import ClientSecurity

    security = ClientSecurity(sasl_mechanism="PLAIN", username="alice", password="alice-secret")

    async def run() -> str:
        connection = await BrokerConnection("127.0.0.1", broker.sasl_port, security=security).connect()
        try:
            await connection.request(ApiVersionsRequest(), version=0)
            deadline = time.monotonic() + 5
            while connection.in_flight == 0 and not connection.closed and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # nothing sent: only its own timer can close it (1.5 s x 0.85-0.95)
            return connection.close_reason
        finally:
            await connection.close()

    assert asyncio.run(run()) == RETIRED
