"""The network layer: one asyncio.BufferedProtocol per connection.

Frames are split by protocol.framing's FrameReader (compiled where built; int32 size, capped by
socket.request.max.bytes): the transport reads into its buffers, so a large request (a Produce) lands
in a buffer of its own with no copy in between, and its records are appended to the log from there.
Requests on one connection are served one at a time in arrival order, as Kafka does, so responses
always come back in request order however deeply the client pipelines. The responses finished in one
turn of the event loop leave in one write (a pipelining client — the Java producer keeps five requests
in flight — would otherwise cost a send(2) per small answer); a large one goes at once. Backpressure
both ways: reading pauses while too many requests wait, and serving pauses while the socket's write
buffer is full.
Fetch answers whose record data is in the page cache leave from the segment files with sendfile
(broker/file_sender.py) on plain TCP; the connection holds its next answers until such a one is out.
A malformed frame, an unknown API or an unsupported version closes that connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import struct
import time
from collections import deque

import structlog

from broker import loopback_tcp
from broker.aio import wait_for
from broker.endpoints import Listener
from broker.file_sender import FileSender
from broker.handlers import REGISTRY, BrokerContext, CloseConnection
from broker.log.file_region import FileRegion, release_sent, release_unsent
from broker.metrics.requests import RequestMetrics, RequestTiming
from broker.quotas.request_time import LoopTime
from broker.quotas.request_time import exempt as exempt_from_request_quota
from broker.request_context import RequestContext
from broker.security.errors import AuthenticationFailed
from broker.security.principal import ANONYMOUS
from broker.security.sasl_session import SaslSession, Stage
from broker.security.tls import principal_of
from protocol import framing
from protocol.enums import ApiKey
from protocol.errors import ProtocolError

log = structlog.get_logger("server")

MAX_QUEUED_REQUESTS = 32
SEND_AT_ONCE_BYTES = 64 * 1024  # responses queued past this go out without waiting for the loop's turn
FAILED_AUTHENTICATION_DELAY_S = 0.1  # Kafka's connection.failed.authentication.delay.ms default


class Connection(asyncio.BufferedProtocol):
    def __init__(self, server: BrokerServer, listener: Listener):
        self.server = server
        self.broker = server.broker
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        sasl = server.broker.config.sasl_listeners.get(listener.name)
        self.sasl = SaslSession(sasl, server.broker.credentials) if sasl is not None else None
        self.reader = framing.frame_reader(server.broker.config.socket_request_max_bytes)
        # The transport reads into the frame reader's buffers: its get_buffer, with no call of ours around it
        self.get_buffer = self.reader.get_buffer  # type: ignore[method-assign]
        if self.sasl is not None:  # frames before authentication are small (sasl.server.max.receive.size)
            self.reader.max_frame = min(self.reader.max_frame, server.broker.config.sasl_max_receive_size)
        self.queue: deque[tuple[bytearray, float]] = deque()  # (frame, when it arrived)
        self.timing: RequestTiming | None = None  # the request being served (metrics)
        # Made by the server in its loop; kept, as asking for the running loop costs a getpid(2) each time
        self.loop = asyncio.get_running_loop()
        # The connection's one serving task, from its first request to its end, and what it awaits while
        # no request is queued (a task per request cost the loop a task's making and ending per Fetch)
        self.worker: asyncio.Task | None = None
        self.idle: asyncio.Future | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.reading_paused = False
        self.closed = False
        self.deadline: asyncio.TimerHandle | None = None  # for finishing SASL authentication
        self.sasl_principal_taken = False
        self.outgoing: list = []  # response bytes waiting for the end of this turn of the loop
        self.outgoing_bytes = 0
        self.send_scheduled = False
        # TLS must encrypt every byte in the process: only plain TCP answers send from files.
        self.sends_files = server.broker.config.tls_listeners.get(listener.name) is None
        self.file_sender: FileSender | None = None  # made at the first answer sent from files
        # What handlers know of this connection (principal, peer, listener, SASL session, the answer's
        # FileRegions): one for all its requests, which are served one at a time
        self.context = RequestContext(ANONYMOUS, "", listener.name, self.sasl, [] if self.sends_files else None)

    # --- asyncio callbacks ----------------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.sends_files:
            # Writing pauses as soon as anything waits in the transport and resumes once nothing does:
            # `writable` then says a sendfile beside the transport cannot pass queued bytes. (Kafka too
            # reads no request from a connection while an answer is still being sent.)
            transport.set_write_buffer_limits(high=0)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.context.client_host = peer[0] if peer else ""
        congestion = self.broker.config.loopback_congestion_control
        if congestion and peer and not self.server.congestion_control_failed:
            try:  # BBR's pacing on loopback spreads each large answer over time (broker/loopback_tcp.py)
                loopback_tcp.apply(transport.get_extra_info("socket"), peer[0], congestion)
            except OSError as exc:  # said once, then left to the system (not a warning per connection)
                self.server.congestion_control_failed = True
                log.warning("setting the congestion control failed; loopback connections keep the system's",
                            peer=self.peer, error=repr(exc))
        if self.sasl is not None:
            self._arm_authentication_deadline()
        else:  # on SSL listeners a verified client certificate names the client
            certified = principal_of(transport.get_extra_info("peercert"))
            if certified is not None:
                self.context.principal = certified
                log.info("authenticated", peer=self.peer, principal=certified, mechanism="TLS client certificate")
        connection_rate = self.broker.quotas.connections
        if connection_rate.enabled and peer and self._throttled(connection_rate.admit(peer[0])):
            return
        self.server.connections.add(self)

    def _throttled(self, throttle_ms: int) -> bool:
        """Over its IP's connection_creation_rate: served nothing and closed once the throttle time is up
        (Kafka's acceptor closes it late, so that the client does not come straight back)."""
        if not throttle_ms:
            return False
        log.info("connection throttled: over its address's connection_creation_rate", peer=self.peer,
                 throttle_ms=throttle_ms)
        self.closed = True
        if self.deadline is not None:
            self.deadline.cancel()
        transport = self._wire
        transport.pause_reading()
        self.loop.call_later(throttle_ms / 1000, transport.close)
        return True

    @property
    def _wire(self) -> asyncio.Transport:
        """The transport: every caller runs after connection_made gave it."""
        assert self.transport is not None, "no transport before connection_made"
        return self.transport

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.reader.buffer_updated(nbytes)
        except ProtocolError as exc:
            self._drop("bad frame", error=str(exc))
            return
        if not frames:
            return
        arrived = time.perf_counter()
        self.queue.extend(zip(frames, itertools.repeat(arrived)))  # pairs made in C: no generator frame
        if len(self.queue) >= MAX_QUEUED_REQUESTS and not self.reading_paused:
            self._wire.pause_reading()
            self.reading_paused = True
        idle = self.idle
        if idle is not None:  # wake()'s work, without its call: once per request
            self.idle = None
            if not idle.done():
                idle.set_result(None)
        elif self.worker is None and not self.closed:
            self.worker = self.loop.create_task(self._serve_queue())

    def wake(self) -> None:
        """An idle worker looks again at its queue and at whether it should stop (the server stopping)."""
        idle, self.idle = self.idle, None
        if idle is not None and not idle.done():
            idle.set_result(None)

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self.file_sender is not None:
            self.file_sender.close()
        if self.deadline is not None:
            self.deadline.cancel()
        self.writable.set()
        self.server.connections.discard(self)
        if self.context.share_session is not None and not self.server.stopping:  # (a stop keeps the files)
            self.broker.shares.disconnected(self.context.share_session)
            self.context.share_session = None
        if self.worker is not None and not self.server.stopping:
            self.worker.cancel()  # nobody will read the answer (e.g. a parked long-poll fetch)

    # --- serving ---------------------------------------------------------------------------------------

    async def _serve_queue(self) -> None:
        try:
            while not self.closed and not self.server.stopping:
                if not self.queue:  # buffer_updated or the server's stop wakes it
                    self.idle = self.loop.create_future()
                    await self.idle
                    continue
                frame, arrived = self.queue.popleft()
                if self.reading_paused and len(self.queue) < MAX_QUEUED_REQUESTS // 2:
                    self._wire.resume_reading()
                    self.reading_paused = False
                try:
                    served = await self._serve(frame, arrived)
                except Exception:  # our bug (a handler's own failure is caught in _serve): the client must not wait
                    log.exception("serving a request failed", peer=self.peer)
                    self._drop("serving a request failed")
                    return
                del frame  # not held while the connection idles: a Produce request's frame can be megabytes
                if not served:
                    return
                if not self.writable.is_set():  # no coroutine for an answer already out
                    await self.writable.wait()
                if self.timing is not None:
                    self.timing.sent()
                    self.timing = None
                if self.context.throttle_ms:
                    await self._mute()
        finally:
            self.worker = self.idle = None

    async def _serve(self, frame: bytearray, arrived: float) -> bool:
        """Serve one request; False when the connection must close."""
        sasl = self.sasl
        if sasl is not None and sasl.stage is Stage.RAW_TOKENS:
            return await self._serve_raw_token(frame)
        try:
            api_key, version, correlation_id = framing.peek_request(frame)
        except ProtocolError as exc:
            return self._drop("bad request header", error=str(exc))
        if sasl is not None:
            if sasl.authenticated and not self._session_current(api_key):
                return False
            if not sasl.admits(api_key):
                return self._drop("request not allowed before SASL authentication", api_key=api_key,
                                  stage=sasl.stage.value)
        handler = REGISTRY.get(api_key)
        if handler is None:
            return self._drop("request for an API we do not serve", api_key=api_key, version=version)
        if version not in handler.accepts:
            if handler.reply_to_newer is not None and version > handler.versions.high:
                self._send([framing.encode_response(handler.reply_to_newer(), 0, correlation_id)])
                return True
            return self._drop("unsupported version", api=handler.name, version=version)
        try:
            request = handler.decode(frame)
        except ProtocolError as exc:
            return self._drop("malformed request", api=handler.name, version=version, error=exc.message)
        # SaslHandshake and SaslAuthenticate move the session on; Fetch puts the FileRegions it answers with
        # in file_regions. (The answer is made here, not in a coroutine of its own: one fewer per request.)
        context = self.context
        context.request_bytes = len(frame)
        try:
            self.timing = self.server.request_metrics.begin(handler.name, arrived)
            request_quotas = self.broker.quotas.requests
            metered = request_quotas.enabled and not exempt_from_request_quota(request)
            try:
                if metered:
                    loop_time = context.request_time = LoopTime(handler.fn(self.broker, request, context))
                    try:
                        response = await loop_time
                    finally:  # however it ended: the connection's next request never sees this one's loop time
                        # (cleared already where the handler charged it itself: a consumer's Fetch)
                        uncharged, context.request_time = context.request_time is not None, None
                else:
                    response = await handler.fn(self.broker, request, context)
            except asyncio.CancelledError:
                raise
            except CloseConnection as exc:
                return self._drop(str(exc) or "closed by the handler", api=handler.name)
            except Exception:
                log.exception("handler failed", api=handler.name, version=version, peer=self.peer,
                              client_id=request.header.client_id)
                return self._drop("handler failed", api=handler.name)
            self.timing.handled(response)
            if self.closed:
                return True
            if response is None:  # no answer due (acks=0, or a refused re-authentication that just closes)
                return self._after_sasl_step()
            if metered:
                if uncharged:  # checked against the quota before the answer is made
                    throttle_ms = request_quotas.charge(context, request.header.client_id, loop_time.seconds)
                    if throttle_ms > getattr(response, "throttle_time_ms", throttle_ms):
                        response.throttle_time_ms = throttle_ms  # the larger of the two quotas' (Produce, ...)
                encoding = time.perf_counter()
            try:
                chunks = handler.encode(response, version, correlation_id)
            except Exception:
                # A response the version cannot carry is our bug; the client must not wait for it forever.
                log.exception("response encoding failed", api=handler.name, version=version, peer=self.peer)
                return self._drop("response encoding failed", api=handler.name)
            if metered:  # and the encoding's, unchecked (Kafka's network thread time)
                request_quotas.record_unchecked(context, request.header.client_id, time.perf_counter() - encoding)
            regions = context.file_regions
            if regions:
                sender = self.file_sender
                if sender is None or self.outgoing or self.closed or not self.writable.is_set():
                    return await self._send_from_files_later(chunks, regions)
                return self._send_from_files(sender, chunks, regions)
            self._send(chunks)
            return self._after_sasl_step()
        finally:
            regions = context.file_regions
            if regions:  # not handed to the file sender: the answer was not sent
                for failure in release_unsent(regions):
                    log.warning("releasing an unsent answer's files failed", peer=self.peer, error=repr(failure))

    async def _mute(self) -> None:
        """A client over its quota: no request of this connection is read or served for the throttle time
        once its answer is out (Kafka mutes the channel, KIP-219); new clients also wait by themselves."""
        delay_s = self.context.throttle_ms / 1000
        self.context.throttle_ms = 0
        self.flush()
        if not self.reading_paused:
            self._wire.pause_reading()
        with contextlib.suppress(TimeoutError):  # the mute itself; a stopping server ends it
            await wait_for(self.server.stopped.wait(), delay_s)
        if not self.reading_paused and not self.closed:
            self._wire.resume_reading()

    async def _send_from_files_later(self, chunks: list, regions: list[FileRegion]) -> bool:
        """_send_from_files once the answers before it are out (or the connection is gone), with the
        file sender made at the connection's first answer from files."""
        if self.outgoing:
            self.flush()  # the answers before it go first, ...
        if not self.writable.is_set():
            await self.writable.wait()  # ... all the way into the socket (connection_made's buffer limits)
        if self.closed:
            return False
        if self.file_sender is None:
            try:
                self.file_sender = FileSender(self.loop, self._wire.get_extra_info("socket").fileno())
            except OSError as exc:  # no descriptor left for the duplicate (ulimit -n): copy this time
                log.warning("sending from files not possible", peer=self.peer, error=repr(exc))
                return await self._send_copied(chunks, regions)
        return self._send_from_files(self.file_sender, chunks, regions)

    def _send_from_files(self, sender: FileSender, chunks: list, regions: list[FileRegion]) -> bool:
        """Send an answer whose record data stays in segment files, with nothing before it left to send.
        The serve loop waits (`writable`) until it is out; a segment cut short underneath breaks the size
        already sent: close then. The regions are released by `_serve` unless handed to the file sender."""
        handed = list(regions)
        regions.clear()
        try:
            if sender.send(chunks, functools.partial(self._files_sent, handed)):  # all in the socket already
                self.server.file_bytes_sent += release_sent(handed)
            elif sender.busy:  # _files_sent once it is out (unless it failed at once: called already)
                self.writable.clear()
        except BaseException:  # not an OSError (those reach _files_sent): our bug; the pins must still go
            release_unsent(handed)
            raise
        return not self.closed

    def _files_sent(self, regions: list[FileRegion], error: OSError | None) -> None:
        sent = release_sent(regions)
        if self.closed:
            return
        if error is not None:
            self._drop("sending record data from segment files failed", error=repr(error))
        else:
            self.server.file_bytes_sent += sent
        self.writable.set()

    async def _send_copied(self, chunks: list, regions: list[FileRegion]) -> bool:
        data = await self.broker.replicas.read_slices([region.slices for region in regions])
        copies = {id(region): got for region, got in zip(regions, data, strict=True)}
        if any(len(copies[id(region)]) != len(region) for region in regions):
            return self._drop("a segment file was cut short under an answer")
        self._send([copies.get(id(chunk), chunk) for chunk in chunks])
        return True

    def _send(self, pieces: list) -> None:
        """Queue a response's bytes (in request order); they leave with the others of this turn."""
        self.outgoing += pieces
        self.outgoing_bytes += sum(len(piece) for piece in pieces)
        if self.outgoing_bytes >= SEND_AT_ONCE_BYTES:
            self.flush()
        elif not self.send_scheduled:
            self.send_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.send_scheduled = False
        if self.outgoing and not self.closed:
            pieces, self.outgoing, self.outgoing_bytes = self.outgoing, [], 0
            self._wire.writelines(pieces)

    def _after_sasl_step(self) -> bool:
        """Take the principal once authenticated; after a failed handshake or authentication, close once
        the answer is out (with Kafka's delay before closing, which slows guessing)."""
        if self.sasl is None:
            return True
        context = self.context
        if self.sasl.authenticated and not self.sasl_principal_taken and self.sasl.principal is not None:
            self.sasl_principal_taken = True  # once: a user may be named ANONYMOUS
            context.principal = self.sasl.principal
            self.reader.max_frame = self.broker.config.socket_request_max_bytes
            log.info("re-authenticated" if self.sasl.reauthentications else "authenticated", peer=self.peer,
                     principal=context.principal, mechanism=self.sasl.mechanism,
                     session_lifetime_ms=self.sasl.lifetime_ms)
        if self.sasl.stage is Stage.FAILED:
            log.info("authentication failed; closing", peer=self.peer, mechanism=self.sasl.mechanism)
            self.flush()  # the failure's answer goes out before the close
            self.closed = True
            transport = self._wire
            self.loop.call_later(FAILED_AUTHENTICATION_DELAY_S, transport.close)
            return False
        return True

    def _session_current(self, api_key: int) -> bool:
        """KIP-368, as Kafka's Processor checks each request it receives (its connection is muted while one
        is served, so that is when Ebb serves it): a SaslHandshake may begin a re-authentication; any other
        request on an expired session closes the connection unanswered. False when it closed."""
        assert self.sasl is not None
        now = time.monotonic_ns()
        if api_key == ApiKey.SASL_HANDSHAKE and self.sasl.begin_reauthentication(now):
            self.sasl_principal_taken = False  # taken again (the same) once re-authenticated
            self.reader.max_frame = min(self.reader.max_frame, self.broker.config.sasl_max_receive_size)
            self._arm_authentication_deadline()  # Ebb's own bound, as for the first authentication
            return True
        if self.sasl.expired(now):
            return self._drop("SASL session expired: not re-authenticated in time", api_key=api_key,
                              principal=self.context.principal, lifetime_ms=self.sasl.lifetime_ms)
        return True

    def _arm_authentication_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
        timeout_s = self.broker.config.sasl_authentication_timeout_ms / 1000
        self.deadline = self.loop.call_later(timeout_s, self._authentication_deadline)

    def _authentication_deadline(self) -> None:
        if not self.closed and self.sasl is not None and not self.sasl.authenticated:
            self._drop("SASL (re-)authentication not finished in time",
                       timeout_ms=self.broker.config.sasl_authentication_timeout_ms)

    async def _serve_raw_token(self, frame: bytearray) -> bool:
        """SaslHandshake v0: the frame is a bare SASL token, answered by a bare size-prefixed token."""
        assert self.sasl is not None  # bare tokens are read on SASL listeners only
        try:
            reply = await self.sasl.authenticate(bytes(frame))
        except AuthenticationFailed as exc:
            log.info("authentication failed", peer=self.peer, error=str(exc))
            return self._drop("SASL authentication failed")
        self._send([struct.pack(">i", len(reply)) + reply])
        return self._after_sasl_step()

    def _drop(self, reason: str, **details) -> bool:
        log.warning(f"closing connection: {reason}", peer=self.peer, **details)
        self.flush()  # the answers to the requests before this one still go out (abort drops only the unsent)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
        return False


class StartAborted(RuntimeError):
    """The server was stopped between `bind` and `serve` (an embedding program stopping a broker still
    starting): there is nothing left to serve, and the start is abandoned."""


class BrokerServer:
    def __init__(self, broker: BrokerContext):
        self.broker = broker
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[Connection] = set()
        self.file_bytes_sent = 0  # record bytes of the answers sent whole from segment files (sendfile)
        self.stopping = False
        self.congestion_control_failed = False  # ebb.socket.loopback.congestion.control refused once: not again
        self.stopped = asyncio.Event()  # set by stop(): a muted connection's wait ends then, not at its throttle's end
        self.request_metrics = RequestMetrics()  # counts and times every request served (the metrics)

    async def bind(self) -> None:
        """Bind every listener and let the kernel take connections, but accept none: a client connects
        and its requests wait, unread, until `serve` (Kafka's ZooKeeper-era broker too binds before it
        registers and reads no request until its services are up). A port in use fails start-up here."""
        if self.stopping:
            raise StartAborted("the broker was stopped before its listeners were bound: start-up abandoned")
        loop = asyncio.get_running_loop()
        backlog = self.broker.config.socket_listen_backlog_size
        for listener in self.broker.config.listeners:
            tls = self.broker.config.tls_listeners.get(listener.name)
            server = await loop.create_server(functools.partial(Connection, self, listener), listener.host or None,
                                              listener.port, ssl=tls.context if tls is not None else None,
                                              reuse_address=True, backlog=backlog, start_serving=False)
            self.servers.append(server)
            # Before listen(): a connection the kernel completes from then on is born with it.
            self._listen_with_congestion_control(server)
            for sock in server.sockets:  # asyncio listens only once serving; its socket wrapper has no listen()
                with sock.dup() as same_socket:
                    same_socket.listen(backlog)
            log.info("bound; connections wait until the broker serves", listener=str(listener))

    async def serve(self) -> None:
        """Accept the connections waiting since `bind`, and every new one; StartAborted once stopped (its
        listeners are closed: asyncio would fail on their sockets gone)."""
        if self.stopping:
            raise StartAborted("the broker was stopped before it served: start-up abandoned")
        for server, listener in zip(self.servers, self.broker.config.listeners, strict=True):
            await server.start_serving()
            log.info("listening", listener=str(listener))

    def _listen_with_congestion_control(self, server: asyncio.base_events.Server) -> None:
        """A loopback listener's connections are born with the loopback congestion control: switched
        after the accept, they would keep the pacing of the system's BBR (broker/loopback_tcp.py)."""
        congestion = self.broker.config.loopback_congestion_control
        for sock in server.sockets:
            try:
                loopback_tcp.apply_to_listener(sock, congestion)
            except OSError as exc:  # connections are still switched one by one (Connection.connection_made)
                log.warning("setting the congestion control on a listener failed", error=repr(exc))

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish (up to `grace_s`), then close every connection."""
        self.stopping = True
        self.stopped.set()
        for server in self.servers:
            server.close()
        replicas = getattr(self.broker, "replicas", None)
        if replicas is not None:
            replicas.wake_all()  # parked long polls answer now instead of holding shutdown
        for connection in self.connections:  # idle workers end (busy ones once their request is answered)
            connection.wake()
        workers = {c.worker: c for c in self.connections if c.worker is not None}
        if workers:
            _, pending = await asyncio.wait(workers, timeout=grace_s)
            if pending:  # a request that never finished (or a client not reading its answer): say whose
                log.warning("requests still in flight after the shutdown grace period; closing their connections",
                            grace_s=grace_s, peers=sorted(workers[w].peer for w in pending))
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.flush()  # answers finished in the grace period still go out
                connection.transport.close()
        for server in self.servers:
            await server.wait_closed()
