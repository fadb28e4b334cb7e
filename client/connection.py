"""One TCP connection to one broker: framing, pipelining, timeouts, and ApiVersions negotiation.

Requests are written as soon as they are made and may be in flight together; a single reader task
matches each response to its request by correlation id. Kafka brokers answer in order, but matching
by id means we never depend on it.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any, TypeVar, cast

import structlog

from protocol.enums import ApiKey
from protocol.errors import ErrorCode, ProtocolError
from protocol.framing import DEFAULT_MAX_FRAME, FrameReader, decode_response, encode_request
from protocol.messages import ApiMessage, ApiRequest, ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest
from protocol.wire import I16, I32

from .aio import wait_for
from .errors import (
    BrokerConnectionError,
    BrokerUnreachableError,
    ConnectionClosedError,
    MalformedResponseError,
    RequestTimeoutError,
    UnsupportedVersionError,
    error_for,
)
from .security import AuthenticationError, ClientSecurity, SaslClient
from .versions import API_VERSIONS_FIRST_TRY, api_name, api_versions_retry, pick_version

log = structlog.get_logger("ebb.client.connection")

SOFTWARE_NAME = "ebb-python"
try:
    SOFTWARE_VERSION = metadata.version("ebb")
except metadata.PackageNotFoundError:  # running from a source tree that was never installed
    SOFTWARE_VERSION = "0.0.0"

DEFAULT_REQUEST_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
# A large answer is received straight into a buffer of its own (FrameReader) grown by this much at a time:
# one step holds a consumer's 8 MiB Fetch round
FRAME_STEP = 16 * 2**20
_CORRELATION_IDS = 2**31
_R = TypeVar("_R", bound=ApiMessage)  # the response of the request sent
# KIP-368: a broker that gives a SASL session a lifetime closes a connection sending a request after it.
# Rather than re-authenticate in place (Kafka's Java client waits until nothing is in flight), a connection
# retires within the window of the lifetime where Kafka's client re-authenticates: it reports itself
# disconnected, so callers open a fresh one, and closes once its last answer is in.
REAUTH_WINDOW = (0.85, 0.95)
RETIRED = "retired before its SASL session's end (KIP-368)"


class BrokerConnection:
    """A connection to one broker. `await connect()` opens it and negotiates versions."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int | None = None,
        client_id: str = "ebb",
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        max_frame: int = DEFAULT_MAX_FRAME,
        security: ClientSecurity | None = None,
    ):
        self.host = host
        self.security = security  # TLS and SASL, when the listener asks for them
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_frame = max_frame
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_version: int | None = None  # which ApiVersions version the broker answered
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future[Any], int, int]] = {}  # each its request's response
        self._socket: _FramedSocket | None = None
        self._closed = False
        self._close_reason = "not connected"
        self._retire_at: float | None = None  # time.monotonic() past which it serves no new caller (KIP-368)
        self._retire_timer: asyncio.TimerHandle | None = None  # closes it then if idle (else its last answer does)
        self._log = log.bind(broker=self.address, node_id=node_id)

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._socket is not None and not self._closed and not self._retiring()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def close_reason(self) -> str:
        """Why it is not open ("not connected" before it ever was)."""
        return self._close_reason

    def _retiring(self) -> bool:
        return self._retire_at is not None and time.monotonic() >= self._retire_at

    def _session_lifetime(self, answer: ApiMessage) -> None:
        lifetime_ms = getattr(answer, "session_lifetime_ms", 0)
        if lifetime_ms > 0:
            delay_s = lifetime_ms / 1000 * random.uniform(*REAUTH_WINDOW)
            self._retire_at = time.monotonic() + delay_s
            # Callers replace a retired connection without closing it: an idle one closes itself.
            if self._retire_timer is not None:
                self._retire_timer.cancel()
            self._retire_timer = asyncio.get_running_loop().call_later(delay_s, self._retire_if_idle)

    def _retire_if_idle(self) -> None:
        self._retire_timer = None
        if not self._pending:
            self._shut(RETIRED)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def __repr__(self) -> str:
        state = "open" if self.connected else self._close_reason
        return f"<BrokerConnection {self.address} node={self.node_id} {state}>"

    # -- lifecycle --

    async def connect(self) -> BrokerConnection:
        if self._socket is not None:
            raise RuntimeError(f"{self!r} was already connected; make a new one")
        framed = _FramedSocket(self.max_frame, self._dispatch, self._lost)
        try:
            tls = self.security.ssl_context if self.security is not None else None
            server_hostname = (self.host if self.security is not None and self.security.check_hostname else "") \
                if tls is not None else None
            transport, _ = await wait_for(
                asyncio.get_running_loop().create_connection(lambda: framed, self.host, self.port, ssl=tls,
                                                             server_hostname=server_hostname),
                self.connect_timeout_s,
            )
        except (OSError, TimeoutError) as exc:
            reason = f"timed out after {self.connect_timeout_s:g}s" if isinstance(exc, TimeoutError) else str(exc)
            raise BrokerUnreachableError(
                f"cannot connect to {self.address}: {reason}", host=self.host, port=self.port
            ) from exc
        framed.connection_made(transport)  # uvloop may call it only after create_connection has returned
        self._socket = framed
        try:
            await self._negotiate()
            if self.security is not None and self.security.sasl_mechanism is not None:
                await self._authenticate(self.security)
        except BaseException:
            await self.close()
            raise
        self._log.debug("connected", api_versions=self.api_versions_version, apis=len(self.api_versions))
        return self

    async def close(self) -> None:
        if self._closed:
            return
        self._shut("closed by the client")
        if self._socket is not None:
            await self._socket.closed

    async def __aenter__(self) -> BrokerConnection:
        return await self.connect()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _shut(self, reason: str) -> None:
        """Mark closed, fail everything in flight, and close the socket (without waiting)."""
        if self._closed:
            return
        self._closed = True
        self._close_reason = reason
        if self._retire_timer is not None:
            self._retire_timer.cancel()
            self._retire_timer = None
        pending, self._pending = self._pending, {}
        for future, api_key, version in pending.values():
            if not future.done():
                future.set_exception(ConnectionClosedError(
                    f"connection to {self.address} {reason} while waiting for {api_name(api_key)} v{version}",
                    host=self.host, port=self.port, request_sent=True,
                ))
        if self._socket is not None:
            self._socket.close()

    # -- versions --

    def pick_version(self, api_key: int, *, low: int | None = None, high: int | None = None) -> int:
        """The highest version of an API both we and this broker speak (UnsupportedVersionError if none)."""
        try:
            return pick_version(api_key, self.api_versions, low=low, high=high)
        except UnsupportedVersionError as exc:
            raise UnsupportedVersionError(f"{exc.message} ({self.address})") from None

    async def _negotiate(self) -> None:
        version = API_VERSIONS_FIRST_TRY
        body = ApiVersionsRequest(client_software_name=SOFTWARE_NAME, client_software_version=SOFTWARE_VERSION)
        response = await self.request(body, version=version)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            # An older broker: its error reply is in the v0 layout and names the ApiVersions range it reads.
            retry = api_versions_retry((k.api_key, k.min_version, k.max_version) for k in response.api_keys)
            self._log.debug("api_versions_fallback", tried=version, retry=retry)
            version = retry
            response = await self.request(body, version=version)
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, f"ApiVersions v{version} from {self.address}")
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        self.api_versions_version = version

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate requests."""
        mechanism = security.sasl_mechanism or ""
        handshake = await self.request(SaslHandshakeRequest(mechanism=mechanism), version=1)
        if handshake.error_code != ErrorCode.NONE:
            raise AuthenticationError(ErrorCode.from_code(handshake.error_code),
                                      f"{self.address} does not offer SASL {mechanism} "
                                      f"(it offers {', '.join(handshake.mechanisms)})")
        sasl = SaslClient(security)
        version = self.pick_version(ApiKey.SASL_AUTHENTICATE)
        first = await self.request(SaslAuthenticateRequest(auth_bytes=sasl.first()), version=version)
        if first.error_code != ErrorCode.NONE:
            raise AuthenticationError(ErrorCode.from_code(first.error_code), f"{self.address}: {first.error_message}")
        if mechanism == "PLAIN":
            self._session_lifetime(first)
            return
        final = await self.request(SaslAuthenticateRequest(auth_bytes=sasl.answer(bytes(first.auth_bytes))),
                                   version=version)
        if final.error_code != ErrorCode.NONE:
            raise AuthenticationError(ErrorCode.from_code(final.error_code), f"{self.address}: {final.error_message}")
        sasl.verify_final(bytes(final.auth_bytes))
        self._session_lifetime(final)

    # -- requests --

    async def request(self, body: ApiRequest[_R], *, version: int | None = None,
                      timeout_s: float | None = None) -> _R:
        """Send one request and wait for its response body."""
        api_key = _api_key(body)
        if version is None:
            version = self.pick_version(api_key)
        correlation_id = next(self._correlation) % _CORRELATION_IDS
        future: asyncio.Future[_R] = asyncio.get_running_loop().create_future()
        frame = self._encode(body, version, correlation_id)
        # Registered before writing: a fast broker may answer before drain() returns.
        self._pending[correlation_id] = (future, api_key, version)
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        try:
            await self._write(frame)
            return await wait_for(future, timeout)
        except TimeoutError:
            raise RequestTimeoutError(
                f"{api_name(api_key)} v{version} to {self.address}: no response within {timeout:g}s"
            ) from None
        finally:
            # A late answer to a request we gave up on finds no entry and is dropped by the reader.
            self._pending.pop(correlation_id, None)
            if future.done() and not future.cancelled():
                future.exception()  # failed by _shut when the write failed: the write's error was raised
            if not self._pending and self._retiring():
                self._shut(RETIRED)

    async def send_only(self, body: ApiMessage, *, version: int | None = None) -> None:
        """Send a request the broker will not answer (Produce with acks=0)."""
        if version is None:
            version = self.pick_version(_api_key(body))
        await self._write(self._encode(body, version, next(self._correlation) % _CORRELATION_IDS))

    def _encode(self, body: ApiMessage, version: int, correlation_id: int) -> bytes:
        try:
            return encode_request(body, version, correlation_id, self.client_id)
        except ProtocolError as exc:
            if exc.error_code == ErrorCode.UNSUPPORTED_VERSION:
                raise UnsupportedVersionError(exc.message) from None
            raise

    async def _write(self, frame: bytes) -> None:
        if self._closed or self._socket is None:
            raise ConnectionClosedError(f"connection to {self.address} is {self._close_reason}",
                                        host=self.host, port=self.port, request_sent=False)
        try:
            await self._socket.write(frame)
        except OSError as exc:
            self._shut(f"failed on write ({exc})")
            raise ConnectionClosedError(f"connection to {self.address} failed on write: {exc}",
                                        host=self.host, port=self.port, request_sent=True) from exc

    # -- the reader --

    def _lost(self, reason: str) -> None:
        if not self._closed:
            self._log.info("connection_lost", reason=reason, in_flight=len(self._pending))
        self._shut(reason)

    def _dispatch(self, frame: bytearray) -> None:
        if len(frame) < 4:
            self._lost(f"sent a frame of {len(frame)} bytes")
            return
        correlation_id = I32.unpack_from(frame, 0)[0]
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            self._log.debug("response_dropped", correlation_id=correlation_id)
            return
        future, api_key, version = entry
        if future.done():  # the caller was cancelled
            return
        try:
            future.set_result(_decode(bytes(frame), api_key, version))  # bytes: the decoder's reads share it
        except ProtocolError as exc:
            future.set_exception(MalformedResponseError(
                f"{api_name(api_key)} v{version} response from {self.address} does not decode: {exc}"))


class _FramedSocket(asyncio.BufferedProtocol):
    """The socket under a BrokerConnection. The transport reads straight into protocol.framing's
    FrameReader, so a large answer (a Fetch round of megabytes) lands in one buffer of its own as it
    arrives; a StreamReader appended each read to a growing bytearray and copied the frame out of it,
    which cost a consumer more CPU than decoding the records. Writes wait while the transport is full."""

    def __init__(self, max_frame: int, on_frame: Callable[[bytearray], None], on_lost: Callable[[str], None]):
        self._frames = FrameReader(max_frame, direct_step=FRAME_STEP)
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._writable: asyncio.Future[None] | None = None  # set while the transport's buffer is full
        self._error: OSError | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # once or twice (BrokerConnection.connect), the same transport; uvloop's are not asyncio.Transport
        self._transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._frames.buffer_updated(nbytes)
        except ProtocolError as exc:
            self._on_lost(f"sent a bad frame ({exc.message})")
            return
        for frame in frames:
            self._on_frame(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self._error = ConnectionResetError("connection lost") if exc is None else OSError(str(exc))
        self._wake()
        if not self.closed.done():
            self.closed.set_result(None)
        self._on_lost("closed by the broker" if exc is None else f"failed on read ({exc})")

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake()

    def _wake(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    async def write(self, data: bytes) -> None:
        if self._error is not None or self._transport is None:
            raise self._error or ConnectionResetError("not connected")
        self._transport.write(data)
        while self._writable is not None:
            await asyncio.shield(self._writable)
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        elif not self.closed.done():
            self.closed.set_result(None)


def _api_key(body: ApiMessage) -> int:
    assert body.api_key is not None, f"{type(body).__name__} is not a request"
    return body.api_key


def _decode(frame: bytes, api_key: int, version: int) -> ApiMessage:
    # An UNSUPPORTED_VERSION ApiVersions reply is always in the v0 layout, whatever we asked for. Its
    # header is v0 (4 bytes) and every version's body starts with the error code, so we can peek.
    if (api_key == ApiKey.API_VERSIONS and version > 0 and len(frame) >= 6
            and I16.unpack_from(frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION):
        version = 0
    return decode_response(frame, api_key, version)[1]


async def open_connection(host: str, port: int, **options) -> BrokerConnection:
    """Connect and negotiate; the caller closes it."""
    return await BrokerConnection(host, port, **options).connect()


__all__ = ["BrokerConnection", "BrokerConnectionError", "open_connection"]
