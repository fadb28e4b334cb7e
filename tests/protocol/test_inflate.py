"""Decompression bombs: a compressed record section is decompressed no further than its declared
records need (protocol/inflate.py), for every codec, with memory that a cap small enough to be
blown past by the bomb bounds; sound sections decompress as before."""

import time
import tracemalloc

import pytest

from protocol.compression import Compression, compress, decompress_prefix
from protocol.errors import ErrorCode, ProtocolError
from protocol.inflate import declared_end, inflate
from protocol.records import RecordBatch, build_batch, with_records
from protocol.varint import write_varint

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
BOMB = 64 << 20  # what the bombs inflate to
LIMIT = 4 << 20  # the cap the bounded tests give inflate


def one_record(value: bytes) -> bytes:
    """A record section of one record (offset and timestamp deltas 0, no key, no headers)."""
    body = bytearray(b"\0\0\0\1")  # attributes, timestamp delta, offset delta, key length -1
    write_varint(body, len(value))
    body += value
    body.append(0)  # no headers
    section = bytearray()
    write_varint(section, len(body))
    return bytes(section + body)


def refused_within_bounds(codec: Compression, section: bytes, count: int = 1) -> str:
    """Inflate a bomb: it must be refused as corrupt quickly, its peak Python memory far below BOMB."""
    data = compress(codec, section)
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(ProtocolError) as caught:
            inflate(codec, data, count, LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert peak < 3 * LIMIT, f"{peak} bytes held"
    assert time.monotonic() - started < 5
    return caught.value.message


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_zeros_behind_one_record_are_refused_at_the_first_record(codec):
    assert "record 0 claims 0 bytes" in refused_within_bounds(codec, b"\0" * BOMB)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_bytes_after_the_declared_records_are_refused(codec):
    message = refused_within_bounds(codec, one_record(b"v") + b"\0" * BOMB)
    assert "bytes remain after its 1 records" in message


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_records_needing_more_than_the_cap_are_refused(codec):
    assert "need more than" in refused_within_bounds(codec, one_record(b"\0" * BOMB))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_a_record_claiming_past_the_cap_is_refused_before_decompressing_to_it(codec):
    section = bytearray()
    write_varint(section, (1 << 31) - 1)
    assert "need more than" in refused_within_bounds(codec, bytes(section) + b"\0" * (1 << 20))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_sound_sections_past_the_first_guess_decompress_whole(codec):
    """Records larger than the first buffer (and a snappy section of many xerial blocks) grow it."""
    records = [(b"k%d" % i, bytes(range(256)) * (40 * i), [], 1000 + i) for i in range(60)]
    batch = RecordBatch(build_batch(records, compression=codec))
    assert [r.value for r in batch.records()] == [r[1] for r in records]
    plain = bytes(RecordBatch(build_batch(records)).body())
    assert bytes(inflate(codec, compress(codec, plain), 60, len(plain))) == plain


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_a_prefix_stops_at_its_size(codec):
    data = bytes(range(256)) * 1024
    out, complete = decompress_prefix(codec, compress(codec, data), 1000)
    assert not complete and len(out) <= 1000 and bytes(out) == data[: len(out)]
    out, complete = decompress_prefix(codec, compress(codec, data), len(data))
    assert complete and bytes(out) == data


def test_declared_end_walks_lengths_only():
    section = one_record(b"abc") + one_record(b"de")
    assert declared_end(section, 2) == (len(section), True)
    assert declared_end(section[:3], 2) == (len(one_record(b"abc")), False)
    assert declared_end(b"", 1) == (1, False)  # the length itself is still to come
    with pytest.raises(ProtocolError):
        declared_end(b"\x00", 1)


def test_a_batch_bomb_is_refused_by_its_records_not_its_codec():
    """RecordBatch.body(), what every reader of a stored or produced batch goes through, is bounded."""
    batch = RecordBatch(with_records(RecordBatch(build_batch([(b"k", b"v", [], 1)], compression=Compression.ZSTD)),
                                     b"\0" * BOMB, 1, 1))
    with pytest.raises(ProtocolError, match="record 0 claims 0 bytes"):
        batch.body()
