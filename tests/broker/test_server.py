"""The network layer and ApiVersions, against a real broker process on loopback."""

import asyncio
import socket
import struct

import pytest

from broker.app import Broker
from broker.config import load_config
from broker.log.checkpoint import CLEAN_SHUTDOWN_FILE
from broker.server import StartAborted
from protocol import framing
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest, MetadataRequest


def _connect(broker) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    return sock


def _read_frame(sock) -> bytes:
    size = struct.unpack(">i", _read_exact(sock, 4))[0]
    return _read_exact(sock, size)


def _read_exact(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _api_versions(broker, version: int):
    with _connect(broker) as sock:
        sock.sendall(framing.encode_request(
            ApiVersionsRequest(client_software_name="ebb-test", client_software_version="1.0"), version, 7, "t"))
        return framing.decode_response(_read_frame(sock), 18, version)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_what_is_registered(broker, version):
    correlation_id, body = _api_versions(broker, version)
    assert correlation_id == 7 and body.error_code == ErrorCode.NONE
    keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert keys[18] == (0, 4)
    assert 71 not in keys and 72 not in keys  # never advertise what is not implemented (client telemetry)


def test_too_new_api_versions_gets_the_v0_error_reply(broker):
    with _connect(broker) as sock:
        frame = bytearray(framing.encode_request(ApiVersionsRequest(), 4, 9, "t"))
        frame[6:8] = struct.pack(">h", 99)
        sock.sendall(frame)
        assert _read_frame(sock) == bytes.fromhex("00000009" "0023" "00000001" "001200000004")


def test_bad_client_software_name_is_invalid_request(broker):
    with _connect(broker) as sock:
        sock.sendall(framing.encode_request(
            ApiVersionsRequest(client_software_name="bad name!", client_software_version="1"), 3, 1, "t"))
        _, body = framing.decode_response(_read_frame(sock), 18, 3)
    assert body.error_code == ErrorCode.INVALID_REQUEST


def test_pipelined_requests_are_answered_in_order(broker):
    with _connect(broker) as sock:
        sock.sendall(b"".join(framing.encode_request(ApiVersionsRequest(), v % 3, 100 + v, "t") for v in range(20)))
        ids = [framing.decode_response(_read_frame(sock), 18, v % 3)[0] for v in range(20)]
    assert ids == list(range(100, 120))


@pytest.mark.parametrize("garbage", [
    b"\xff\xff\xff\xff",                                   # negative size
    struct.pack(">i", 200 * 1024 * 1024),                  # above socket.request.max.bytes
    struct.pack(">i", 6) + b"\x00\x12\x00\x00\x00\x00",   # header cut short
    struct.pack(">i", 10) + b"\x7f\x00\x00\x00\x00\x00\x00\x01\x00\x00",  # unknown api key
])
def test_bad_frames_close_only_that_connection(broker, garbage):
    with _connect(broker) as sock:
        sock.sendall(garbage)
        with pytest.raises((ConnectionError, OSError)):
            _read_frame(sock)
    assert _api_versions(broker, 3)[1].error_code == ErrorCode.NONE


def test_answers_before_a_bad_request_still_arrive(broker):
    """Pipelined requests ahead of an unknown API are answered before the connection closes."""
    unknown_api = struct.pack(">i", 10) + b"\x7f\x00\x00\x00\x00\x00\x00\x01\x00\x00"
    with _connect(broker) as sock:
        sock.sendall(b"".join(framing.encode_request(ApiVersionsRequest(), 0, 100 + v, "t") for v in range(3))
                     + unknown_api)
        ids = [framing.decode_response(_read_frame(sock), 18, 0)[0] for _ in range(3)]
        with pytest.raises((ConnectionError, OSError)):
            _read_frame(sock)
    assert ids == [100, 101, 102]


def test_unsupported_version_closes_the_connection(broker):
    with _connect(broker) as sock:
        frame = bytearray(framing.encode_request(MetadataRequest(topics=[]), 12, 1, "t"))
        frame[6:8] = struct.pack(">h", 50)
        sock.sendall(frame)
        with pytest.raises((ConnectionError, OSError)):
            _read_frame(sock)
    assert _api_versions(broker, 0)[1].error_code == ErrorCode.NONE


async def test_answers_finished_together_leave_in_one_write(tmp_path):
    """Twenty pipelined requests served in one turn of the loop go out in one write, in order; a
    pipelining client (the Java producer keeps five in flight) would otherwise cost a send(2) each."""
    import asyncio

    from broker.app import Broker
    from broker.config import load_config

    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    await broker.start()
    try:
        port = broker.server.servers[0].sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(framing.encode_request(ApiVersionsRequest(), 0, 1, "t"))  # the connection exists now
        await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
        (connection,) = broker.server.connections
        writes = []
        real_writelines = connection.transport.writelines

        def counting(pieces):
            writes.append(len(pieces))
            real_writelines(pieces)

        connection.transport.writelines = counting
        writer.write(b"".join(framing.encode_request(ApiVersionsRequest(), v % 3, 100 + v, "t") for v in range(20)))
        ids = []
        for v in range(20):
            frame = await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
            ids.append(framing.decode_response(frame, 18, v % 3)[0])
        writer.close()
        assert ids == list(range(100, 120))
        assert sum(writes) == 20 and len(writes) <= 2, f"{len(writes)} writes for 20 answers: {writes}"
    finally:
        await broker.stop()


@pytest.mark.parametrize("overrides, backlog", [([], 50), (["socket.listen.backlog.size=7"], 7)])
async def test_listeners_queue_what_socket_listen_backlog_size_says(tmp_path, overrides, backlog):
    """Kafka's socket.listen.backlog.size (default 50) bounds the connections the kernel queues for a
    listener that has not accepted them yet: at start-up, before the services are up, that is every one."""
    import subprocess

    from broker.app import Broker
    from broker.config import load_config

    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0", *overrides]))
    await broker.start()
    try:
        port = broker.server.servers[0].sockets[0].getsockname()[1]
        listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True)
        (line,) = listening.stdout.splitlines()
        assert int(line.split()[2]) == backlog, line  # a listening socket's Send-Q is its backlog
    finally:
        await broker.stop()


async def test_a_loopback_listener_has_its_congestion_control_before_it_listens(tmp_path, monkeypatch):
    """The kernel completes connections from listen() on, before the broker accepts any: a listener that
    got the loopback congestion control only after listen() could hold connections born without it."""
    from broker import loopback_tcp
    from broker.app import Broker
    from broker.config import load_config

    listening_when_set = []
    real_apply = loopback_tcp.apply_to_listener

    def recording(sock, name):
        listening_when_set.append(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
        return real_apply(sock, name)

    monkeypatch.setattr(loopback_tcp, "apply_to_listener", recording)
    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    await broker.start()
    await broker.stop()
    assert listening_when_set == [0], listening_when_set


class _HeldService:
    """A service whose start waits for `go_on` once it has said it is `starting`."""

    def __init__(self) -> None:
        self.starting, self.go_on = asyncio.Event(), asyncio.Event()

    async def start(self) -> None:
        self.starting.set()
        await self.go_on.wait()

    async def stop(self) -> None:
        pass


async def _start_held(tmp_path, *later_services) -> tuple[Broker, asyncio.Task, _HeldService]:
    """A broker whose start is held at a service started right after the replicas (then `later_services`)."""
    held_service = _HeldService()
    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    broker.services += [held_service, *later_services]
    start = asyncio.create_task(broker.start())
    held = asyncio.create_task(held_service.starting.wait())
    await asyncio.wait([start, held], return_when=asyncio.FIRST_COMPLETED)
    assert held_service.starting.is_set(), f"start() ended before the held service started: {start}"
    return broker, start, held_service


async def test_a_server_stopped_while_the_services_start_aborts_the_start_clearly(tmp_path):
    """An embedding program may stop the server while the broker's services start: start() then fails with
    StartAborted (not asyncio's TypeError on the closed listeners) and ends cleanly, its logs closed."""
    broker, start, held = await _start_held(tmp_path)
    await broker.server.stop()
    held.go_on.set()
    with pytest.raises(StartAborted, match="start-up abandoned"):
        await start
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_the_start_up_probe_tells_a_serving_broker_from_a_port_that_only_accepts(broker):
    """client/probe.py, which tests, benchmarks and the pipeline demo wait on: a port that accepts but
    never answers (Ebb's listeners before it serves) is not ready; a serving broker is, with its APIs."""
    from client.probe import answers, api_versions

    advertised = _api_versions(broker, 0)[1].api_keys
    assert api_versions("127.0.0.1", broker.port) == {k.api_key: (k.min_version, k.max_version) for k in advertised}
    assert answers("127.0.0.1", broker.port)
    with socket.create_server(("127.0.0.1", 0)) as held:  # the kernel completes connections; no one reads
        assert not answers("127.0.0.1", held.getsockname()[1], timeout_s=0.3)


async def test_a_broker_stopped_while_its_services_start_undoes_the_start_and_starts_nothing_more(tmp_path):
    """Broker.stop() during start (an embedding program): the start stops at its next service, undoes what it
    started and closes the logs cleanly; the stop returns once that is done, tearing nothing down beside it."""
    started_after: list[str] = []

    class NextService:
        async def start(self) -> None:
            started_after.append("started")

        async def stop(self) -> None:
            pass

    broker, start, held = await _start_held(tmp_path, NextService())
    stop = asyncio.create_task(broker.stop())
    await asyncio.sleep(0.05)
    assert not stop.done() and not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # nothing torn down beside the start
    held.go_on.set()
    with pytest.raises(StartAborted, match="stopped while its services started"):
        await start
    await asyncio.wait_for(stop, 10)
    assert started_after == []
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
