"""Variable-length integers as Kafka writes them.

Records use the protobuf scheme: seven bits per byte, least significant group first, the high bit set
on every byte but the last. Signed values are zigzag-mapped first (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...)
so small negative numbers stay short. A varint holds an int32 and takes at most 5 bytes; a varlong
holds an int64 and takes at most 10. Decoders reject anything longer, anything that runs past the
buffer, and anything whose value does not fit the type, with ProtocolError(CORRUPT_MESSAGE).

Decoders take any indexable byte buffer (bytes, bytearray, memoryview) and a position, and return
(value, position after the value).
"""

from __future__ import annotations

from protocol.errors import ErrorCode, ProtocolError

Buffer = bytes | bytearray | memoryview

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def java_long(value: int) -> int:
    """`value` as Java's long arithmetic leaves it (wrapping): a base timestamp near Long.MAX plus a
    positive delta is a negative timestamp to Kafka, and its bounds are computed so."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    return (value - INT64_MIN) % (1 << 64) + INT64_MIN
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10


def _corrupt(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.CORRUPT_MESSAGE, message)


# --- unsigned -------------------------------------------------------------------------------------


def write_unsigned_varint(out: bytearray, value: int) -> None:
    """Append `value` (>= 0) to `out` in base-128 groups."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_unsigned(buf: Buffer, pos: int, max_bytes: int, limit: int, what: str) -> tuple[int, int]:
    # One pass over at most `max_bytes` bytes; `limit` is the exclusive bound of the raw value.
    result = 0
    shift = 0
    end = len(buf)
    for i in range(pos, pos + max_bytes):
        if i >= end:
            raise _corrupt(f"{what} at position {pos} runs past the end of the buffer")
        byte = buf[i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result >= limit:
                raise _corrupt(f"{what} at position {pos} is out of range")
            return result, i + 1
        shift += 7
    raise _corrupt(f"{what} at position {pos} is longer than {max_bytes} bytes")


def read_unsigned_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read an unsigned varint (uint32, at most 5 bytes), as used by compact lengths."""
    return _read_unsigned(buf, pos, MAX_VARINT_BYTES, 1 << 32, "unsigned varint")


# --- zigzag ---------------------------------------------------------------------------------------


def zigzag_encode(value: int) -> int:
    """Map a signed integer onto the non-negative integers, alternating signs."""
    return value * 2 if value >= 0 else -value * 2 - 1


def write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag varint (int32) to `out`."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint cannot hold {value}: outside int32")
    write_unsigned_varint(out, zigzag_encode(value))


def write_varlong(out: bytearray, value: int) -> None:
    """Append a zigzag varlong (int64) to `out`."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong cannot hold {value}: outside int64")
    write_unsigned_varint(out, zigzag_encode(value))


def encode_varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    out = bytearray()
    write_varlong(out, value)
    return bytes(out)


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zigzag varint (int32, at most 5 bytes)."""
    try:
        byte = buf[pos]
        if byte < 0x80:  # one byte: most lengths and deltas
            return (byte >> 1) ^ -(byte & 1), pos + 1
        second = buf[pos + 1]
        if second < 0x80:  # two bytes: lengths up to 8 KiB
            raw = (byte & 0x7F) | (second << 7)
            return (raw >> 1) ^ -(raw & 1), pos + 2
    except IndexError:
        raise _corrupt(f"varint at position {pos} runs past the end of the buffer") from None
    raw, pos = _read_unsigned(buf, pos, MAX_VARINT_BYTES, 1 << 32, "varint")
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zigzag varlong (int64, at most 10 bytes)."""
    try:
        byte = buf[pos]
    except IndexError:
        raise _corrupt(f"varlong at position {pos} runs past the end of the buffer") from None
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    raw, pos = _read_unsigned(buf, pos, MAX_VARLONG_BYTES, 1 << 64, "varlong")
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varint(data: Buffer) -> int:
    """Decode a buffer that holds exactly one zigzag varint."""
    value, end = read_varint(data, 0)
    if end != len(data):
        raise _corrupt(f"{len(data) - end} trailing bytes after varint")
    return value


def decode_varlong(data: Buffer) -> int:
    """Decode a buffer that holds exactly one zigzag varlong."""
    value, end = read_varlong(data, 0)
    if end != len(data):
        raise _corrupt(f"{len(data) - end} trailing bytes after varlong")
    return value


def varint_size(value: int) -> int:
    """Bytes taken by `value` as a zigzag varint or varlong."""
    return max(1, (zigzag_encode(value).bit_length() + 6) // 7)
