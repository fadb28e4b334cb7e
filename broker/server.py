"""The network layer: one asyncio.BufferedProtocol per connection.

Frames are split by protocol.framing.FrameReader (int32 size, capped by socket.request.max.bytes): the
transport reads into its buffers, so a large request (a Produce) lands in a buffer of its own with no
copy in between, and its records are appended to the log from there.
Requests on one connection are served one at a time in arrival order, as Kafka does, so responses
always come back in request order however deeply the client pipelines. Backpressure both ways: reading
pauses while too many requests wait, and serving pauses while the socket's write buffer is full.
A malformed frame, an unknown API or an unsupported version closes that connection only.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

import structlog

from broker.handlers import REGISTRY, CloseConnection
from broker.metrics.requests import RequestMetrics, RequestTiming
from protocol import framing
from protocol.errors import ProtocolError

log = structlog.get_logger("server")

MAX_QUEUED_REQUESTS = 32


class Connection(asyncio.BufferedProtocol):
    def __init__(self, server: BrokerServer):
        self.server = server
        self.broker = server.broker
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.host = ""
        self.reader = framing.FrameReader(server.broker.config.socket_request_max_bytes)
        self.queue: deque[tuple[bytearray, float]] = deque()  # (frame, when it arrived)
        self.timing: RequestTiming | None = None  # the request being served (metrics)
        self.worker: asyncio.Task | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.reading_paused = False
        self.closed = False

    # --- asyncio callbacks ----------------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.host = peer[0] if peer else ""
        self.server.connections.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.reader.buffer_updated(nbytes)
        except ProtocolError as exc:
            self._drop("bad frame", error=str(exc))
            return
        if not frames:
            return
        arrived = time.perf_counter()
        self.queue.extend((frame, arrived) for frame in frames)
        if len(self.queue) >= MAX_QUEUED_REQUESTS and not self.reading_paused:
            self.transport.pause_reading()
            self.reading_paused = True
        if self.worker is None:
            self.worker = asyncio.get_running_loop().create_task(self._serve_queue())

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.writable.set()
        self.server.connections.discard(self)
        if self.worker is not None and not self.server.stopping:
            self.worker.cancel()  # nobody will read the answer (e.g. a parked long-poll fetch)

    # --- serving ---------------------------------------------------------------------------------------

    async def _serve_queue(self) -> None:
        try:
            while self.queue and not self.closed and not self.server.stopping:
                frame, arrived = self.queue.popleft()
                if self.reading_paused and len(self.queue) < MAX_QUEUED_REQUESTS // 2:
                    self.transport.resume_reading()
                    self.reading_paused = False
                if not await self._serve(frame, arrived):
                    return
                await self.writable.wait()
                if self.timing is not None:
                    self.timing.sent()
                    self.timing = None
        finally:
            self.worker = None
            if self.queue and not self.closed and not self.server.stopping:  # arrived while finishing
                self.worker = asyncio.get_running_loop().create_task(self._serve_queue())

    async def _serve(self, frame: bytearray, arrived: float) -> bool:
        """Serve one request; False when the connection must close."""
        try:
            api_key, version, correlation_id = framing.peek_request(frame)
        except ProtocolError as exc:
            return self._drop("bad request header", error=str(exc))
        handler = REGISTRY.get(api_key)
        if handler is None:
            return self._drop("request for an API we do not serve", api_key=api_key, version=version)
        if handler.reply_to_newer is not None and version > handler.versions.high:
            self.transport.write(framing.encode_response(handler.reply_to_newer(), 0, correlation_id))
            return True
        if version not in handler.versions:
            return self._drop("unsupported version", api=handler.name, version=version)
        try:
            request = handler.decode(frame)
        except ProtocolError as exc:
            return self._drop("malformed request", api=handler.name, version=version, error=exc.message)
        request.client_host = self.host  # group members are described with the address they connect from
        self.timing = self.server.request_metrics.begin(handler.name, arrived)
        try:
            response = await handler.fn(self.broker, request)
        except asyncio.CancelledError:
            raise
        except CloseConnection as exc:
            return self._drop(str(exc) or "closed by the handler", api=handler.name)
        except Exception:
            log.exception("handler failed", api=handler.name, version=version, peer=self.peer,
                          client_id=request.header.client_id)
            return self._drop("handler failed", api=handler.name)
        self.timing.handled(response)
        if response is None or self.closed:
            return True
        try:
            self.transport.writelines(handler.encode(response, version, correlation_id))
        except Exception:
            # A response the version cannot carry is our bug; the client must not wait for it forever.
            log.exception("response encoding failed", api=handler.name, version=version, peer=self.peer)
            return self._drop("response encoding failed", api=handler.name)
        return True

    def _drop(self, reason: str, **details) -> bool:
        log.warning(f"closing connection: {reason}", peer=self.peer, **details)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
        return False


class BrokerServer:
    def __init__(self, broker):
        self.broker = broker
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[Connection] = set()
        self.stopping = False
        self.request_metrics = RequestMetrics()  # counts and times every request served (the metrics)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self.broker.config.listeners:
            server = await loop.create_server(lambda: Connection(self), listener.host or None, listener.port,
                                              reuse_address=True)
            self.servers.append(server)
            log.info("listening", listener=str(listener))

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish (up to `grace_s`), then close every connection."""
        self.stopping = True
        for server in self.servers:
            server.close()
        replicas = getattr(self.broker, "replicas", None)
        if replicas is not None:
            replicas.wake_all()  # parked long polls answer now instead of holding shutdown
        workers = [c.worker for c in self.connections if c.worker is not None]
        if workers:
            await asyncio.wait(workers, timeout=grace_s)
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.close()
        for server in self.servers:
            await server.wait_closed()
