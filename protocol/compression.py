"""The four record-batch codecs, on top of cramjam.

What sits on the wire, per codec (the codec id lives in bits 0-2 of the batch attributes):

- gzip: an RFC 1952 stream; several members back to back are read as one.
- snappy: Kafka's Java client wraps snappy in the xerial block framing: a 16-byte header
  (0x82 "SNAPPY" 0x00, int32 version, int32 oldest compatible version) and then blocks, each an int32
  big-endian length followed by one raw snappy block. librdkafka writes a bare raw snappy block instead.
  We read both and write the xerial framing, since that is what Java writes and every client reads.
- lz4: the LZ4 frame format. Kafka's Java reader decompresses each block on its own, so we write
  independent blocks.
- zstd: a standard zstd frame (several frames are read as one).

`decompress` raises CodecError (CORRUPT_MESSAGE) for anything it cannot decode; nothing else escapes.
It has no cap on the output: a 1 MiB zstd frame can inflate to 32 GB. `decompress_prefix` writes at
most a given number of bytes, stopping as soon as they are written (protocol/inflate.py grows that
bound as far as the batch's records need).
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from protocol.errors import ErrorCode, ProtocolError

Buffer = bytes | bytearray | memoryview


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_HEADER_SIZE = len(XERIAL_HEADER)  # 16
XERIAL_BLOCK_SIZE = 32 * 1024  # uncompressed bytes per block, as the xerial library does by default

_BLOCK_LENGTH = struct.Struct(">i")


class CodecError(ProtocolError):
    """Data its codec cannot decode (CORRUPT_MESSAGE); records that decode but do not parse are
    another matter (Kafka tells them apart: broker/log/validator.py)."""


def _corrupt(message: str) -> CodecError:
    return CodecError(ErrorCode.CORRUPT_MESSAGE, message)


# --- snappy (xerial framing) ----------------------------------------------------------------------


def _snappy_xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        out += _BLOCK_LENGTH.pack(len(block))
        out += block
    return bytes(out)


def _snappy_blocks(data: Buffer) -> list[memoryview]:
    """The raw snappy blocks of `data`: itself, or those of its xerial framing."""
    view = memoryview(data)
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return [view]
    # The version and compatibility words are ignored: some writers get their byte order wrong, and
    # there has only ever been one version of this framing.
    if len(view) < XERIAL_HEADER_SIZE:
        raise _corrupt("xerial snappy header is truncated")
    blocks = []
    pos = XERIAL_HEADER_SIZE
    end = len(view)
    while pos < end:
        # A second stream may be appended to the first; its header simply restarts the framing.
        if bytes(view[pos : pos + len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
            if end - pos < XERIAL_HEADER_SIZE:
                raise _corrupt("xerial snappy header is truncated")
            pos += XERIAL_HEADER_SIZE
            continue
        if end - pos < _BLOCK_LENGTH.size:
            raise _corrupt("xerial snappy block length is truncated")
        (length,) = _BLOCK_LENGTH.unpack_from(view, pos)
        pos += _BLOCK_LENGTH.size
        if length < 0 or length > end - pos:
            raise _corrupt(f"xerial snappy block length {length} is out of range")
        blocks.append(view[pos : pos + length])
        pos += length
    return blocks


def _snappy_decompress(data: Buffer) -> bytes:
    blocks = _snappy_blocks(data)
    if len(blocks) == 1:
        return bytes(cramjam.snappy.decompress_raw(blocks[0]))
    return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in blocks)


def _snappy_prefix(data: Buffer, size: int) -> tuple[memoryview, bool]:
    """`decompress_prefix` for snappy: each raw block states its length up front, so a block that
    would not fit is never decompressed (the prefix ends before it)."""
    out = bytearray(size)
    written = 0
    for block in _snappy_blocks(data):
        length = cramjam.snappy.decompress_raw_len(block)
        if written + length > size:
            return memoryview(out)[:written], False
        written += cramjam.snappy.decompress_raw_into(block, memoryview(out)[written : written + length])
    return memoryview(out)[:written], True


# --- lz4 ------------------------------------------------------------------------------------------


def _lz4_compress(data: Buffer, level: int | None = None) -> bytes:
    # cramjam's one-shot lz4.compress links blocks, so use the streaming compressor, which can be told
    # not to (and which only takes bytes).
    compressor = cramjam.lz4.Compressor(level=level, block_linked=False)
    compressor.compress(data if isinstance(data, bytes) else bytes(data))
    return bytes(compressor.finish())


# --- dispatch -------------------------------------------------------------------------------------


def compress(codec: Compression, data: Buffer, level: int | None = None) -> bytes:
    """Compress `data` the way a Kafka producer would for `codec` (NONE returns a copy). `level`: the
    codec's level (gzip 1-9, lz4 1-17, zstd -131072-22; snappy has none), None its default. cramjam
    lets go of the GIL while it works, so a thread pool runs this beside the event loop."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == Compression.SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == Compression.LZ4:
        return _lz4_compress(data, level)
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise ValueError(f"unknown compression codec {codec!r}")


_STREAMED = {Compression.GZIP: cramjam.gzip, Compression.LZ4: cramjam.lz4, Compression.ZSTD: cramjam.zstd}
_FULL = "failed to write whole buffer"  # what cramjam's *_into says when the output buffer is full


def decompress_prefix(codec: int, data: Buffer, size: int) -> tuple[memoryview, bool]:
    """Decompress at most `size` bytes of `data`: (the output, True) if that is all of it, else (a
    prefix of it, False). Memory and time stay within `size`, however far the data would inflate.
    Raises ProtocolError(CORRUPT_MESSAGE) as `decompress` does."""
    try:
        if codec == Compression.SNAPPY:
            return _snappy_prefix(data, size)
        module = _STREAMED.get(codec)  # type: ignore[call-overload]
        if module is None:
            if codec == Compression.NONE:
                return memoryview(data)[:size], len(data) <= size
            raise _corrupt(f"unknown compression codec {codec}")
        out = bytearray(size)
        try:
            written = module.decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if _FULL not in str(exc):
                raise
            return memoryview(out), False  # the codecs write what they have before they fail
        return memoryview(out)[:written], True
    except CodecError:
        raise
    except Exception as exc:  # cramjam raises DecompressionError, and occasionally others, on bad input
        name = Compression(codec).name.lower()
        raise _corrupt(f"cannot decompress {name} data: {exc}") from exc


def decompress(codec: int, data: Buffer) -> bytes:
    """Undo `compress`. Raises ProtocolError(CORRUPT_MESSAGE) on an unknown codec or bad data."""
    try:
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
        if codec == Compression.NONE:
            return bytes(data)
    except CodecError:
        raise
    except Exception as exc:  # cramjam raises DecompressionError, and occasionally others, on bad input
        name = Compression(codec).name.lower()
        raise _corrupt(f"cannot decompress {name} data: {exc}") from exc
    raise _corrupt(f"unknown compression codec {codec}")
