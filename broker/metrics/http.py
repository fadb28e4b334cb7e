"""The /metrics endpoint: a small HTTP/1.1 server on the broker's own event loop.

A scrape runs `generate_latest` on the loop between requests, so every value it reads is a
consistent snapshot of state only the loop changes (no thread races it). One request per
connection; anything but GET or HEAD of /metrics gets a plain error status.
"""

from __future__ import annotations

import asyncio

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = structlog.get_logger("metrics")

MAX_HEADER_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error"}


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port, reuse_address=True,
                                                  limit=MAX_HEADER_BYTES)
        if self.port == 0:
            self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics listening", url=f"http://{self.host}:{self.port}/metrics")

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            status, body = self._answer(head)
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

    def _answer(self, head: bytes) -> tuple[int, bytes]:
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return 400, b"expected an HTTP/1.x request line\n"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if target != b"/metrics":
            return 404, b"metrics are at /metrics\n"
        if method not in (b"GET", b"HEAD"):
            return 405, b"use GET\n"
        try:
            return 200, generate_latest(self._registry)
        except Exception:
            log.exception("metrics collection failed")  # a collector bug: say so, keep the broker up
            return 500, b"metrics collection failed; see the broker log\n"
