"""The compiled walk over incoming batches (protocol/_batch_scan.c) against its Python reference
(check_batches_in_python): on every input, either both accept with the same result, or the compiled
one steps aside (None) and the Python one raises the error Kafka would answer."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import batch_check
from broker.log.batch_check import check_batches, check_batches_in_python
from broker.log.common import InvalidRecordError
from broker.log.config import LogConfig
from protocol.records import Compression, build_batch


def test_the_compiled_walk_is_built_and_used():
    # make test installs the package with `pip install -e .`, which builds it; a missing compiler
    # must fail here rather than leave the broker on the slower path unnoticed
    from protocol import _batch_scan

    assert batch_check._compiled_scan is _batch_scan.scan


def _batch(seed: int, count: int, codec: Compression, base_offset: int, epoch: int) -> bytes:
    records = [(f"k{seed}-{i}".encode(), bytes([seed % 256]) * (i * 7 % 50), [], 1_700_000_000_000 + i)
               for i in range(count)]
    return build_batch(records, base_offset=base_offset, compression=codec, partition_leader_epoch=epoch)


batches = st.builds(
    _batch,
    seed=st.integers(0, 1000),
    count=st.integers(1, 6),
    codec=st.sampled_from([Compression.NONE, Compression.GZIP]),
    base_offset=st.integers(0, 2**40),
    epoch=st.integers(-1, 2**31 - 1),
)

# A damage to the run: overwrite a byte, overwrite a header field of the first batch with a chosen
# value, cut the end off or add stray bytes.
_FIELDS = {"batch_length": (8, ">i"), "magic": (16, ">b"), "attributes": (21, ">h"),
           "last_offset_delta": (23, ">i"), "records_count": (57, ">i"), "leader_epoch": (12, ">i")}
damages = st.one_of(
    st.none(),
    st.tuples(st.just("byte"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("field"), st.sampled_from(sorted(_FIELDS)), st.integers(-2**31, 2**31 - 1)),
    st.tuples(st.just("field"), st.sampled_from(sorted(_FIELDS)), st.integers(-3, 80)),
    st.tuples(st.just("cut"), st.integers(1, 200)),
    st.tuples(st.just("stray"), st.binary(min_size=1, max_size=70)),
)


def _damaged(run: bytes, damage) -> bytearray:
    buf = bytearray(run)
    if damage is None or (not buf and damage[0] != "stray"):
        return buf
    kind = damage[0]
    if kind == "byte":
        buf[damage[1] % len(buf)] = damage[2]
    elif kind == "field":
        offset, layout = _FIELDS[damage[1]]
        low, high = (-128, 127) if layout == ">b" else (-2**15, 2**15 - 1) if layout == ">h" else (-2**31, 2**31 - 1)
        struct.pack_into(layout, buf, offset, min(max(damage[2], low), high))
        if damage[1] in ("attributes", "last_offset_delta", "records_count"):  # inside the CRC: keep it right
            end = 12 + struct.unpack_from(">i", buf, 8)[0]
            if 61 <= end <= len(buf):
                struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:end]))
    elif kind == "cut":
        del buf[max(len(buf) - damage[1], 0):]
    else:
        buf += damage[1]
    return buf


def _python_answer(buf, config, from_producer):
    try:
        return check_batches_in_python(buf, config, from_producer=from_producer)
    except InvalidRecordError as exc:
        return exc


@settings(max_examples=400)
@given(run=st.lists(batches, min_size=0, max_size=4), damage=damages, from_producer=st.booleans(),
       max_message_bytes=st.sampled_from([1024 * 1024, 200, 90]), as_view=st.booleans())
def test_compiled_and_python_agree(run, damage, from_producer, max_message_bytes, as_view):
    buf = _damaged(b"".join(run), damage)
    config = LogConfig(max_message_bytes=max_message_bytes)
    target = memoryview(buf) if as_view else buf
    compiled = batch_check._compiled_scan(target, min(config.max_message_bytes, config.segment_bytes),
                                          from_producer, crc32c)
    reference = _python_answer(target, config, from_producer)
    if compiled is None:
        assert isinstance(reference, InvalidRecordError), "the compiled walk refused a run Python accepts"
    else:
        assert compiled == reference
    # and the public entry point answers as the reference does, error included
    try:
        answer = check_batches(target, config, from_producer=from_producer)
    except InvalidRecordError as exc:
        assert isinstance(reference, InvalidRecordError)
        assert (exc.error_code, str(exc)) == (reference.error_code, str(reference))
    else:
        assert answer == reference


def test_sound_run_gives_each_batch():
    first, second = _batch(1, 3, Compression.NONE, 7, 4), _batch(2, 1, Compression.GZIP, 100, -1)
    got = check_batches(bytearray(first + second), LogConfig(), from_producer=True)
    max_ts = 1_700_000_000_002
    assert got == [(0, len(first), 7, 2, max_ts, 4), (len(first), len(second), 100, 0, 1_700_000_000_000, -1)]


@pytest.mark.parametrize("offset", [17, 30, 70])
def test_a_flipped_bit_is_a_corrupt_message(offset):
    buf = bytearray(_batch(3, 4, Compression.NONE, 0, 0))
    buf[offset] ^= 0x01
    assert batch_check._compiled_scan(buf, 1 << 20, True, crc32c) is None
    with pytest.raises(InvalidRecordError, match="CRC") as caught:
        check_batches(buf, LogConfig(), from_producer=True)
    assert caught.value.error_code.name == "CORRUPT_MESSAGE"


def test_a_read_only_buffer_is_checked_too():
    run = _batch(4, 2, Compression.NONE, 0, 0)
    assert batch_check._compiled_scan(run, 1 << 20, True, crc32c) == check_batches_in_python(
        memoryview(run), LogConfig(), from_producer=True)


def test_a_failing_crc_function_raises_and_releases_the_buffer():
    buf = bytearray(_batch(5, 1, Compression.NONE, 0, 0))

    def broken(_data):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        batch_check._compiled_scan(buf, 1 << 20, True, broken)
    buf += b"x"  # a bytearray with an exported buffer could not grow
