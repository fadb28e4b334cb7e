"""The /metrics endpoint: a small HTTP/1.1 server on the broker's own event loop.

A scrape reads state only the loop changes, on the loop (no thread races it), and never holds the
loop for long: it renders one metric family at a time, and a large one (a gauge per partition)
SAMPLES_PER_STEP samples at a time with prometheus_client's `generate_latest`, letting requests run
in between. A collector with long work (a pass over every partition) yields None now and then: a
pause where requests run too (so the registry's collect() is consumed by `render` only). The price
is that families are read at slightly different moments, as in any scrape that is not atomic. One
request per connection; anything but GET or HEAD of /metrics gets an error status.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterable
from typing import Protocol

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from broker.aio import wait_for

log = structlog.get_logger("metrics")

MAX_HEADER_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0
SAMPLES_PER_STEP = 1000  # about 8 ms of rendering here
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error"}


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def bind(self) -> None:
        """Take the port, serving nothing yet: the broker binds it beside its Kafka listeners, before it
        registers, so that a port in use stops start-up there (broker/app.py)."""
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port, reuse_address=True,
                                                  limit=MAX_HEADER_BYTES, start_serving=False)
        if self.port == 0:
            self.port = self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        if self._server is None:
            await self.bind()
        assert self._server is not None
        await self._server.start_serving()
        log.info("metrics listening", url=f"http://{self.host}:{self.port}/metrics")

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            status, body = await self._answer(head)
            method = head.split(b" ", 1)[0]
            content_type = CONTENT_TYPE_LATEST if status == 200 else "text/plain; charset=utf-8"
            writer.write(f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
            if method != b"HEAD":
                writer.write(body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass  # a client that went away or sent no complete request head: nothing to answer
        finally:
            writer.close()

    async def _answer(self, head: bytes) -> tuple[int, bytes]:
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return 400, b"expected an HTTP/1.x request line\n"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if target != b"/metrics":
            return 404, b"metrics are at /metrics\n"
        if method not in (b"GET", b"HEAD"):
            return 405, b"use GET\n"
        try:
            return 200, await render(self._registry)
        except Exception:
            log.exception("metrics collection failed")  # a collector bug: say so, keep the broker up
            return 500, b"metrics collection failed; see the broker log\n"


class _OneFamily:
    """What generate_latest reads from: a registry of one metric family."""

    def __init__(self, family: Metric) -> None:
        self._family = family

    def collect(self) -> list[Metric]:
        return [self._family]


_renders_running = 0
_gc_was_enabled = True


class Collecting(Protocol):
    """A CollectorRegistry, or one collector: families, with None where it pauses in long work."""

    def collect(self) -> Iterable[Metric | None]: ...


async def render(registry: Collecting) -> bytes:
    """The text exposition of `registry`, produced in steps with the loop free in between.

    The cyclic garbage collector is off while a scrape renders: its samples live across a few steps,
    and with the collector on they would be promoted to the oldest generation and set off a full
    collection of the broker's whole heap (measured: 200-270 ms pauses at 10,000 partitions). They
    hold no cycles, so reference counting frees them without it."""
    global _renders_running, _gc_was_enabled
    if _renders_running == 0:
        _gc_was_enabled = gc.isenabled()
        gc.disable()
    _renders_running += 1
    try:
        parts: list[bytes] = []
        for family in registry.collect():  # collectors are generators: each family is read when asked for
            if family is None:  # a collector's pause in the middle of long work
                await asyncio.sleep(0)
                continue
            samples = family.samples
            for start in range(0, max(len(samples), 1), SAMPLES_PER_STEP):
                piece = Metric(family.name, family.documentation, family.type, family.unit)
                piece.samples = samples[start:start + SAMPLES_PER_STEP]
                text = generate_latest(_OneFamily(piece))
                if start:  # a family's # HELP and # TYPE lines come once, before its first sample
                    text = b"".join(line for line in text.splitlines(keepends=True) if not line.startswith(b"# "))
                parts.append(text)
                await asyncio.sleep(0)
        return b"".join(parts)
    finally:
        _renders_running -= 1
        if _renders_running == 0 and _gc_was_enabled:
            gc.enable()
