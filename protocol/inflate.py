"""A compressed record section decompressed no further than its records need.

A batch's codecs can inflate 1 MiB to gigabytes (a zstd frame of zeros: 32 GB), while the header
says how many records it holds. Kafka streams the section and reads only `records_count` records,
refusing any bytes left after them (DefaultRecordBatch's "records still remaining"). Here the
section is decompressed into a bounded buffer (`decompress_prefix`); when it does not fit, the
record lengths in what did decide: bytes past the last record are refused at once, a record
claiming fewer than one byte too, else the bound grows to the end of the record being read (at
least doubling) up to `MAX_SECTION`. So memory stays within twice what the records declare, and a
batch whose records really span more than `MAX_SECTION` is refused (Kafka has no such cap, but its
own buffers stop at 2 GiB).
"""

from __future__ import annotations

from protocol.compression import decompress_prefix
from protocol.errors import ErrorCode, ProtocolError
from protocol.varint import MAX_VARINT_BYTES, Buffer, read_varint

MAX_SECTION = 256 << 20
_FIRST_GUESS = 256 << 10  # most producer batches are smaller once decompressed
_RATIO_GUESS = 8


def _corrupt(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.CORRUPT_MESSAGE, message)


def declared_end(prefix: Buffer, count: int) -> tuple[int, bool]:
    """Walk the record lengths in `prefix`, the start of a record section of `count` records: (where
    the records end, True) when all of them lie in it, else (how far the section must at least reach
    to hold the record being read, False). A length below one is refused as decode_records does."""
    pos = 0
    end = len(prefix)
    for index in range(count):
        try:
            length, start = read_varint(prefix, pos)
        except ProtocolError:
            if end - pos < MAX_VARINT_BYTES:  # the varint is cut by the prefix's end, not malformed
                return end + 1, False
            raise
        if length < 1:
            raise _corrupt(f"record {index} claims {length} bytes")
        pos = start + length
        if pos > end:
            return pos, False
    return pos, True


def inflate(codec: int, section: Buffer, count: int, limit: int = MAX_SECTION) -> memoryview:
    """`section` decompressed with `codec`, holding `count` records; ProtocolError(CORRUPT_MESSAGE) if
    it is corrupt, has bytes past its records, or its records need more than `limit` bytes."""
    size = min(limit, max(_FIRST_GUESS, _RATIO_GUESS * len(section)))
    while True:
        out, complete = decompress_prefix(codec, section, size)
        if complete:
            return out
        needed, whole = declared_end(out, count)
        if whole:
            raise _corrupt(f"Incorrect declared batch size: bytes remain after its {count} records")
        if needed > limit or size >= limit:
            raise _corrupt(f"the {count} records of a batch need more than {limit} bytes decompressed")
        size = min(limit, max(2 * size, needed))
