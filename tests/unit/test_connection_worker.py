"""A connection's one serving task (broker/server.py): it serves the queued requests in order, waits while
none is queued, and ends with the connection or the server; a request that fails outside its handler
closes the connection instead of leaving the requests behind it unserved."""

from __future__ import annotations

import asyncio
import dataclasses
from types import CoroutineType
from typing import cast

from broker.handlers import REGISTRY
from broker.quotas.request_time import RequestQuotas
from broker.server import Connection
from protocol import framing
from protocol.enums import ApiKey
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from tests.unit.fakes import FakeWire, connection_of, frame_served_by


def _arrive(connection: Connection, *correlation_ids: int) -> None:
    """ApiVersions requests with these correlation ids, received in one read (size prefixes and all)."""
    data = b"".join(framing.encode_request(ApiVersionsRequest(), 3, cid, "c") for cid in correlation_ids)
    memoryview(connection.get_buffer(len(data)))[:len(data)] = data
    connection.buffer_updated(len(data))


async def _until(condition) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0)


def _answering(monkeypatch, served: list[int]) -> None:
    async def handler(broker, request, context):
        served.append(request.correlation_id)
        return ApiVersionsResponse()

    frame_served_by(monkeypatch, handler)


async def test_the_worker_serves_in_order_then_waits_for_the_next_requests(monkeypatch):
    served: list[int] = []
    _answering(monkeypatch, served)
    wire = FakeWire()
    connection = connection_of(RequestQuotas(11, 1000), wire)
    _arrive(connection, 1, 2, 3)
    worker = connection.worker
    assert worker is not None
    await _until(lambda: connection.idle is not None)
    assert served == [1, 2, 3] and not worker.done()
    suspended = cast(CoroutineType, worker.get_coro()).cr_frame
    assert suspended is not None and "frame" not in suspended.f_locals  # the last request's bytes are not held
    _arrive(connection, 4)
    await _until(lambda: served == [1, 2, 3, 4] and connection.idle is not None)
    assert connection.worker is worker  # the same task all along


async def test_a_request_failing_outside_its_handler_closes_the_connection(monkeypatch):
    served: list[int] = []
    _answering(monkeypatch, served)
    decode = REGISTRY[ApiKey.API_VERSIONS].decode
    failed: list[bool] = []

    def decode_failing_once(frame):
        if not failed:
            failed.append(True)
            raise ValueError("a bug of ours")
        return decode(frame)

    monkeypatch.setitem(REGISTRY, ApiKey.API_VERSIONS,
                        dataclasses.replace(REGISTRY[ApiKey.API_VERSIONS], decode=decode_failing_once))
    wire = FakeWire()
    connection = connection_of(RequestQuotas(11, 1000), wire)
    _arrive(connection, 1, 2, 3)
    worker = connection.worker
    assert worker is not None
    await _until(worker.done)
    assert wire.aborted and connection.closed and connection.worker is None  # the client learns at once
    assert served == [] and worker.exception() is None


async def _idle(monkeypatch) -> tuple[Connection, asyncio.Task]:
    """A connection whose worker served one request and waits for the next, and that worker."""
    _answering(monkeypatch, [])
    connection = connection_of(RequestQuotas(11, 1000))
    _arrive(connection, 1)
    worker = connection.worker
    assert worker is not None
    await _until(lambda: connection.idle is not None)
    return connection, worker


async def test_an_idle_worker_ends_when_the_server_stops(monkeypatch):
    connection, worker = await _idle(monkeypatch)
    connection.server.stopping = True
    connection.wake()  # as BrokerServer.stop does for every connection
    async with asyncio.timeout(10):
        await worker
    assert connection.worker is None and connection.idle is None


async def test_a_connection_lost_while_idle_ends_its_worker(monkeypatch):
    connection, worker = await _idle(monkeypatch)
    connection.connection_lost(None)
    async with asyncio.timeout(10):
        await asyncio.wait([worker])
    assert worker.cancelled() and connection.worker is None and connection.idle is None
