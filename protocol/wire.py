"""Primitive readers and writers of the Kafka wire format, called by the compiled codecs.

Readers take a binary stream (BytesIO) and raise ProtocolError on lengths that cannot be right.
A short read of a fixed-width value surfaces as struct.error, which the codec turns into
ProtocolError at the top of a decode.
"""

from __future__ import annotations

import struct
import uuid
from io import BytesIO

from .errors import ErrorCode, ProtocolError

I8 = struct.Struct(">b")
U8 = struct.Struct(">B")
I16 = struct.Struct(">h")
U16 = struct.Struct(">H")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")
F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)
MAX_UVARINT32_BYTES = 5


def _bad(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_REQUEST, message)


def read_exact(io: BytesIO, n: int) -> bytes:
    data = io.read(n)
    if len(data) != n:
        raise _bad(f"truncated: wanted {n} bytes, {len(data)} left")
    return data


def read_bool(io: BytesIO) -> bool:
    return U8.unpack(io.read(1))[0] != 0


def read_uuid(io: BytesIO) -> uuid.UUID:
    return uuid.UUID(bytes=read_exact(io, 16))


def write_uuid(io: BytesIO, value: uuid.UUID) -> None:
    io.write(value.bytes)


def read_uvarint(io: BytesIO) -> int:
    """Unsigned varint, 7 bits a byte, least significant first; at most 5 bytes (32 bits)."""
    result = 0
    for i in range(MAX_UVARINT32_BYTES):
        byte = io.read(1)
        if not byte:
            raise _bad("truncated varint")
        b = byte[0]
        result |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            if result > 0xFFFFFFFF:
                raise _bad("varint does not fit in 32 bits")
            return result
    raise _bad("varint longer than 5 bytes")


_UVARINT_CACHE = [bytes([n]) for n in range(128)]


def uvarint_bytes(n: int) -> bytes:
    if 0 <= n < 128:
        return _UVARINT_CACHE[n]
    if n < 0 or n > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def write_uvarint(io: BytesIO, n: int) -> None:
    io.write(uvarint_bytes(n))


# --- lengths -------------------------------------------------------------------------------------

def _length(n: int, nullable: bool, what: str) -> int | None:
    if n >= 0:
        return n
    if n == -1 and nullable:
        return None
    raise _bad(f"invalid {what} length {n}")


def read_len16(io: BytesIO, nullable: bool) -> int | None:
    return _length(I16.unpack(io.read(2))[0], nullable, "string")


def read_len32(io: BytesIO, nullable: bool, what: str = "bytes") -> int | None:
    return _length(I32.unpack(io.read(4))[0], nullable, what)


def read_compact_len(io: BytesIO, nullable: bool, what: str) -> int | None:
    return _length(read_uvarint(io) - 1, nullable, what)


# --- strings ---------------------------------------------------------------------------------------

def _decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(f"string is not valid UTF-8: {exc.reason}") from None


def read_string(io: BytesIO, nullable: bool) -> str | None:
    n = read_len16(io, nullable)
    return None if n is None else _decode_utf8(read_exact(io, n))


def read_compact_string(io: BytesIO, nullable: bool) -> str | None:
    n = read_compact_len(io, nullable, "string")
    return None if n is None else _decode_utf8(read_exact(io, n))


def write_string(io: BytesIO, value: str | None, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise ValueError("null in a non-nullable string")
        io.write(b"\xff\xff")
        return
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError("string longer than 32767 bytes")
    io.write(I16.pack(len(data)))
    io.write(data)


MAX_SHORT_STRING_BYTES = 0x7FFF  # an int16-length string: what every non-flexible version can carry


def fits_short_string(value: str | None) -> bool:
    """True when `value` can go out in any version, flexible or not (and so into Kafka's int16-length
    record keys and values)."""
    return value is None or len(value) <= MAX_SHORT_STRING_BYTES // 4 or \
        len(value.encode("utf-8")) <= MAX_SHORT_STRING_BYTES


def write_free_text(io: BytesIO, value: str | None, nullable: bool) -> None:
    """An error message: free text, so one too long for an int16 length is cut (at a character
    boundary), never a reason to fail the whole response."""
    if value is not None and len(value) > 0x7FFF // 4:
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            value = data[:0x7FFF - len(ELLIPSIS)].decode("utf-8", "ignore") + "…"
    write_string(io, value, nullable)


ELLIPSIS = "…".encode()


def write_compact_string(io: BytesIO, value: str | None, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise ValueError("null in a non-nullable string")
        io.write(b"\x00")
        return
    data = value.encode("utf-8")
    io.write(uvarint_bytes(len(data) + 1))
    io.write(data)


# --- bytes and records ----------------------------------------------------------------------------

def read_bytes(io: BytesIO, nullable: bool) -> bytes | None:
    n = read_len32(io, nullable)
    return None if n is None else read_exact(io, n)


def read_compact_bytes(io: BytesIO, nullable: bool) -> bytes | None:
    n = read_compact_len(io, nullable, "bytes")
    return None if n is None else read_exact(io, n)


def write_bytes(io: BytesIO, value, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise ValueError("null in non-nullable bytes")
        io.write(b"\xff\xff\xff\xff")
        return
    io.write(I32.pack(len(value)))
    io.write(value)


def write_compact_bytes(io: BytesIO, value, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise ValueError("null in non-nullable bytes")
        io.write(b"\x00")
        return
    io.write(uvarint_bytes(len(value) + 1))
    io.write(value)


# --- arrays ---------------------------------------------------------------------------------------

def read_array_len(io: BytesIO, nullable: bool) -> int | None:
    return read_len32(io, nullable, "array")


def read_compact_array_len(io: BytesIO, nullable: bool) -> int | None:
    return read_compact_len(io, nullable, "array")


def write_array_len(io: BytesIO, value, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise ValueError("null in a non-nullable array")
        io.write(b"\xff\xff\xff\xff")
    else:
        io.write(I32.pack(len(value)))


def write_compact_array_len(io: BytesIO, value, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise ValueError("null in a non-nullable array")
        io.write(b"\x00")
    else:
        io.write(uvarint_bytes(len(value) + 1))


# --- tagged fields --------------------------------------------------------------------------------

def tagged_bytes(build, value) -> bytes:
    """Encode one tagged field's value on its own, so its size can be written before it."""
    out = BytesIO()
    build(out, value)
    return out.getvalue()


def write_tagged_section(io: BytesIO, tags: list[tuple[int, bytes]]) -> None:
    io.write(uvarint_bytes(len(tags)))
    for tag, data in tags:
        io.write(uvarint_bytes(tag))
        io.write(uvarint_bytes(len(data)))
        io.write(data)
