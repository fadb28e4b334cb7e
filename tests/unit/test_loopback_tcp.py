"""`ebb.socket.loopback.congestion.control` (broker/loopback_tcp.py): a connection from this host gets the
configured congestion control (Reno by default), an empty value leaves the system's, a name the kernel
refuses stops the broker at start; only loopback peers count as this host."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest

from broker import loopback_tcp
from broker.app import Broker
from broker.config import load_config
from broker.property_table import ConfigError


def _system_default() -> str:
    with socket.socket() as probe:
        return _algorithm(probe)


def _algorithm(sock: socket.socket) -> str:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()


@contextlib.asynccontextmanager
async def _broker(tmp_path, *overrides: str):
    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0", *overrides]))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


async def _server_side_algorithm(tmp_path, *overrides: str) -> str:
    async with _broker(tmp_path, *overrides) as broker:
        port = broker.server.servers[0].sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for _ in range(500):  # connection_made runs on the broker's side of the accept
                if broker.server.connections:
                    break
                await asyncio.sleep(0.01)
            (connection,) = broker.server.connections
            return _algorithm(connection.transport.get_extra_info("socket"))
        finally:
            writer.close()


async def test_a_loopback_connection_gets_reno_by_default(tmp_path):
    assert await _server_side_algorithm(tmp_path) == "reno"


async def test_empty_keeps_the_systems_choice(tmp_path):
    assert await _server_side_algorithm(tmp_path, f"{loopback_tcp.PROPERTY}=") == _system_default()


def test_an_algorithm_the_kernel_refuses_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=loopback_tcp.PROPERTY):
        load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0",
                           f"{loopback_tcp.PROPERTY}=no-such-algorithm"])


@pytest.mark.parametrize("host, expected", [
    ("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("10.0.0.1", False), ("::ffff:10.0.0.1", False), ("2001:db8::1", False), ("fe80::1%eth0", False), ("?", False),
])
def test_only_loopback_peers_count_as_this_host(host, expected):
    assert loopback_tcp.is_loopback(host) is expected


def test_a_remote_peer_keeps_the_systems_choice():
    with socket.socket() as sock:
        before = _algorithm(sock)
        assert loopback_tcp.apply(sock, "10.0.0.1", "reno") is False
        assert _algorithm(sock) == before


async def _listener_algorithm(tmp_path, *overrides: str) -> str:
    async with _broker(tmp_path, *overrides) as broker:
        return _algorithm(broker.server.servers[0].sockets[0])


async def test_a_loopback_listener_has_it_so_its_connections_are_born_with_it(tmp_path):
    # Switched only after the accept, a connection would keep the pacing the system's BBR asked for
    assert await _listener_algorithm(tmp_path) == "reno"


async def test_empty_leaves_the_listener_with_the_systems_choice(tmp_path):
    assert await _listener_algorithm(tmp_path, f"{loopback_tcp.PROPERTY}=") == _system_default()


def test_a_wildcard_listener_keeps_the_systems_choice():
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        before = _algorithm(sock)
        assert loopback_tcp.apply_to_listener(sock, "reno") is False
        assert _algorithm(sock) == before


def test_a_loopback_listener_socket_is_set():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert loopback_tcp.apply_to_listener(sock, "reno") is True
        assert _algorithm(sock) == "reno"
        assert loopback_tcp.apply_to_listener(sock, "") is False
