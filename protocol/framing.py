"""Size framing, request/response headers, and whole-frame encode/decode.

Every frame on a Kafka connection is `int32 size` then header then body. The request header version
follows from the API's flexible versions (v2 when flexible, else v1); the response header is v1 when
flexible, else v0 — except ApiVersions responses, which always use v0 so any client can read them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from io import BytesIO
from typing import Generic, Protocol, TypeVar, cast

from protocol.enums import ApiKey

from . import messages
from .errors import ErrorCode, ProtocolError
from .messages import ApiMessage, RequestHeader, ResponseHeader
from .wire import I32

SIZE_BYTES = 4
DEFAULT_MAX_FRAME = 104857600  # socket.request.max.bytes
# A FrameReader's buffers (its docstring): the scratch buffer's size, the frame size from which a frame gets
# a buffer of its own, and how far ahead of the bytes received that buffer grows
SCRATCH_BYTES = 64 * 1024
DIRECT_MIN = 16 * 1024
DIRECT_STEP = 8 * 1024 * 1024

# The body of a Request: handlers name their own request class, e.g. Request[DeleteRecordsRequest].
BodyT = TypeVar("BodyT", bound=ApiMessage | None)


def request_header_version(api_key: int, api_version: int) -> int:
    return 2 if api_version in messages.api(api_key).request.flexible_versions else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if api_version in messages.api(api_key).response.flexible_versions else 0


def frame_size_error(size: int, max_frame: int) -> ProtocolError:
    """What a frame size below 0 or above `max_frame` is, for every reader (protocol/_frames.c's too)."""
    return ProtocolError(ErrorCode.INVALID_REQUEST, f"frame size {size} outside 0..{max_frame}")


def frame(payload: bytes) -> bytes:
    return I32.pack(len(payload)) + payload


class FrameDecoder:
    """Splits a byte stream into frames (sans-IO): feed bytes, take out whole frames.

    A negative size or one above `max_frame` raises ProtocolError: the connection cannot be trusted
    to stay in step after that, so the caller closes it.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME):
        self.max_frame = max_frame
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        frames = []
        buf = self._buffer
        pos = 0
        while len(buf) - pos >= SIZE_BYTES:
            size = I32.unpack_from(buf, pos)[0]
            if size < 0 or size > self.max_frame:
                raise frame_size_error(size, self.max_frame)
            end = pos + SIZE_BYTES + size
            if end > len(buf):
                break
            frames.append(bytes(buf[pos + SIZE_BYTES:end]))
            pos = end
        if pos:
            del buf[:pos]
        return frames

    @property
    def pending(self) -> int:
        """Bytes held that do not yet make a whole frame."""
        return len(self._buffer)


def complete_frames(view: memoryview, start: int, end: int, max_frame: int) -> tuple[list[bytearray], int]:
    """The whole frames in view[start:end], each a bytearray of its own, and where the first frame not
    all there starts (`end` when none is). A size below 0 or above `max_frame` is a ProtocolError.
    protocol/_frames.c is its compiled twin (tests/protocol/test_frame_reader.py holds them equal)."""
    frames: list[bytearray] = []
    while end - start >= SIZE_BYTES:
        size = I32.unpack_from(view, start)[0]
        if size < 0 or size > max_frame:
            raise frame_size_error(size, max_frame)
        stop = start + SIZE_BYTES + size
        if stop > end:
            break
        frames.append(bytearray(view[start + SIZE_BYTES:stop]))
        start = stop
    return frames, start


try:  # where it is built (setup.py): one call per read from a connection
    from protocol._frames import complete_frames as _compiled_frames
except ImportError:  # pragma: no cover - the package installed without a C compiler
    _compiled_frames = None


class FrameReader:
    """The same splitting for an `asyncio.BufferedProtocol` (sans-IO): the transport reads straight
    into `get_buffer()`, then `buffer_updated(n)` returns the frames completed.

    Small frames are read many at a time into a scratch buffer and copied out once. A frame larger than
    `direct_min` gets a buffer of its own as soon as its size is known; the bytes of it already in the
    scratch buffer are moved there and the socket fills in the rest, so a Produce request's records are
    never copied in user space before they reach the log. Frames are bytearrays the caller owns (the
    log stamps offsets into them in place). Size checks as FrameDecoder. A frame's own buffer grows
    by at most `direct_step` bytes ahead of the data received, so a bare size header cannot make the
    broker commit up to socket.request.max.bytes of memory at once.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME, scratch_bytes: int = SCRATCH_BYTES,
                 direct_min: int = DIRECT_MIN, direct_step: int = DIRECT_STEP):
        self.max_frame = max_frame
        self.direct_min = direct_min
        self.direct_step = direct_step
        self._size = 0  # the size of the large frame being received
        self._scratch = bytearray(scratch_bytes)
        self._view = memoryview(self._scratch)
        self._start = 0  # first byte in the scratch buffer not yet taken out
        self._end = 0  # end of the bytes received into the scratch buffer
        self._frame: bytearray | None = None  # a large frame being received into its own buffer
        self._frame_view: memoryview | None = None
        self._filled = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        if self._frame_view is not None:
            if self._filled == len(self._frame_view):
                # Grow here, not in buffer_updated: the transport has let go of the last buffer now.
                self._frame_view.release()
                frame = self._frame
                assert frame is not None  # set and cleared together with _frame_view
                try:  # a BufferError while the transport still holds the last buffer
                    frame.extend(bytes(min(self._size - self._filled, self.direct_step)))
                finally:  # either way: the next call tries again
                    self._frame_view = memoryview(frame)
            return self._frame_view[self._filled:]
        if self._end == len(self._scratch):
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        if self._frame_view is not None:
            self._filled += nbytes
            if self._filled < self._size:  # get_buffer makes room for the next step
                return []
            whole = self._frame
            assert whole is not None  # set and cleared together with _frame_view
            self._frame = self._frame_view = None
            return [whole]
        self._end += nbytes
        view, start, end = self._view, self._start, self._end
        found = None if _compiled_frames is None else _compiled_frames(view, start, end, self.max_frame)
        frames, start = found if found is not None else complete_frames(view, start, end, self.max_frame)
        if end - start >= SIZE_BYTES:  # a frame not all here yet
            size = I32.unpack_from(view, start)[0]
            if size >= self.direct_min or size + SIZE_BYTES > len(self._scratch):
                # Receive the rest of this frame into its own buffer.
                have = end - start - SIZE_BYTES
                frame = bytearray(min(size, have + self.direct_step))
                frame[:have] = view[start + SIZE_BYTES:end]
                self._frame, self._frame_view, self._filled, self._size = frame, memoryview(frame), have, size
                start = end = 0
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        if self._frame_view is None and end == len(self._scratch):
            self._compact()
        return frames

    def _compact(self) -> None:
        """Move the unfinished frame to the front of the scratch buffer."""
        start, end = self._start, self._end
        if start:
            self._scratch[:end - start] = self._view[start:end]
            self._start, self._end = 0, end - start

    @property
    def pending(self) -> int:
        """Bytes held that do not yet make a whole frame."""
        if self._frame_view is not None:
            return self._filled + SIZE_BYTES
        return self._end - self._start


try:  # FrameReader's compiled twin (setup.py builds it): no Python run per read from a connection
    from protocol._frames import FrameReader as _CompiledFrameReader
except ImportError:  # pragma: no cover - the package installed without a C compiler
    _CompiledFrameReader = None


def frame_reader(max_frame: int = DEFAULT_MAX_FRAME, scratch_bytes: int = SCRATCH_BYTES,
                 direct_min: int = DIRECT_MIN, direct_step: int = DIRECT_STEP) -> FrameReader:
    """A connection's FrameReader: the compiled one where built (tests/protocol/test_frame_reader.py holds
    the two equal), else the Python one."""
    if _CompiledFrameReader is not None:
        return cast(FrameReader, _CompiledFrameReader(max_frame, scratch_bytes, direct_min, direct_step))
    return FrameReader(max_frame, scratch_bytes, direct_min, direct_step)


@dataclass
class Request(Generic[BodyT]):
    # The compiled decoders (protocol/_request_objects.h request_of) set these fields on an instance made
    # without __init__: a __post_init__ here would not run for them.
    header: RequestHeader
    api_key: int
    api_version: int
    correlation_id: int
    body: BodyT  # None for an ApiVersions request newer than we know (body not parsed)


_REQUEST_HEAD = struct.Struct(">hhi")  # every request header's first fields: api key, version, correlation id


def peek_request(frame_bytes: bytes | bytearray) -> tuple[int, int, int]:
    """api_key, api_version and correlation_id, read without parsing the rest."""
    if len(frame_bytes) < 8:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"request of {len(frame_bytes)} bytes has no header")
    return _REQUEST_HEAD.unpack_from(frame_bytes)  # type: ignore[return-value]  # three ints, as the format says


def decode_request(frame_bytes: bytes | bytearray) -> Request[ApiMessage | None]:
    """Parse a request frame (without its size prefix).

    An unknown api key or an unsupported version raises ProtocolError — except ApiVersions, whose
    body is skipped when its version is newer than ours, so the broker can answer UNSUPPORTED_VERSION
    in the v0 layout (KIP-511).
    """
    api_key, api_version, _ = peek_request(frame_bytes)
    api = messages.api(api_key)
    io = BytesIO(frame_bytes)
    header_version = 2 if api_version in api.request.flexible_versions else 1
    header = RequestHeader[header_version].codec.decode_from(io)
    if header.client_id is None:
        header.client_id = ""
    if api_version not in api.versions:
        if api_key == ApiKey.API_VERSIONS and api_version > api.versions.high:
            return Request(header, api_key, api_version, header.correlation_id, None)
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_VERSION, f"{api.name} v{api_version} is not supported ({api.versions})"
        )
    body = api.request[api_version].codec.decode_from(io)
    # Bytes after the body are ignored, as Kafka's broker does: librdkafka 2.16 sends Metadata v13
    # "all topics" requests with three extra bytes, and Kafka answers them.
    return Request(header, api_key, api_version, header.correlation_id, body)


def encode_request(body: ApiMessage, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    """A whole request frame, size prefix included."""
    assert body.api_key is not None, f"{type(body).__name__} is not a request"
    api = messages.api(body.api_key)
    header = RequestHeader(
        request_api_key=body.api_key, request_api_version=api_version,
        correlation_id=correlation_id, client_id=client_id,
    )
    io = BytesIO()
    io.write(b"\0\0\0\0")
    RequestHeader[request_header_version(api.key, api_version)].codec.encode_into(io, header)
    api.request[api_version].codec.encode_into(io, body)
    return _finish_frame(io)


def encode_response(body: ApiMessage, api_version: int, correlation_id: int) -> bytes:
    """A whole response frame, size prefix included."""
    assert body.api_key is not None, f"{type(body).__name__} is not a response"
    io = BytesIO()
    io.write(b"\0\0\0\0")
    encode_response_header_into(io, body.api_key, api_version, correlation_id)
    messages.api(body.api_key).response[api_version].codec.encode_into(io, body)
    return _finish_frame(io)


class ByteSink(Protocol):
    def write(self, data: bytes, /) -> object: ...


def encode_response_header_into(io: ByteSink, api_key: int, api_version: int, correlation_id: int) -> None:
    io.write(response_header(api_key, api_version, correlation_id))


def response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    if response_header_version(api_key, api_version) == 1:
        return I32.pack(correlation_id) + b"\x00"  # no header tagged fields
    return I32.pack(correlation_id)


def decode_response(frame_bytes: bytes, api_key: int, api_version: int) -> tuple[int, ApiMessage]:
    """Parse a response frame (without its size prefix): correlation id and body."""
    api = messages.api(api_key)
    io = BytesIO(frame_bytes)
    header = ResponseHeader[response_header_version(api_key, api_version)].codec.decode_from(io)
    codec = api.response[api_version].codec
    body = codec.decode_from(io)
    if io.tell() != len(frame_bytes):
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"{api.name} v{api_version} response has trailing bytes")
    return header.correlation_id, body


def _finish_frame(io: BytesIO) -> bytes:
    buf = io.getbuffer()
    I32.pack_into(buf, 0, len(buf) - SIZE_BYTES)
    del buf
    return io.getvalue()
