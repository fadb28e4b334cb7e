"""FrameReader (the BufferedProtocol framing) splits any stream exactly as FrameDecoder does, in Python
and compiled (protocol/_frames.c: every test runs both)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import _frames, framing  # built by make test's `pip install -e .`
from protocol.errors import ProtocolError

READERS = [framing.FrameReader, framing.frame_reader]  # the Python one, and what connections use: the compiled one


@pytest.fixture(params=READERS, ids=["python", "compiled"])
def reader_class(request):
    return request.param


def test_connections_read_with_the_compiled_reader():
    assert type(framing.frame_reader(1024)) is _frames.FrameReader
    assert framing.frame_reader(1024).max_frame == 1024


def read_all(reader: framing.FrameReader, stream: bytes, reads: list[int]) -> list[bytes]:
    """Feed `stream` through get_buffer/buffer_updated, each read taking at most the next size in
    `reads` (cycled), as a transport does."""
    out: list[bytes] = []
    position = 0
    i = 0
    while position < len(stream):
        buffer = reader.get_buffer(-1)
        assert len(buffer) > 0
        n = min(len(buffer), reads[i % len(reads)], len(stream) - position)
        i += 1
        buffer[:n] = stream[position:position + n]
        position += n
        out += [bytes(f) for f in reader.buffer_updated(n)]
        del buffer  # a transport holds the buffer at most until buffer_updated returns
    return out


@pytest.mark.parametrize("reader_class", READERS, ids=["python", "compiled"])
@settings(max_examples=300)
@given(
    sizes=st.lists(st.one_of(st.integers(0, 40), st.integers(0, 3000)), max_size=30),
    reads=st.lists(st.integers(1, 5000), min_size=1, max_size=10),
    scratch=st.sampled_from([64, 256, 4096]),
    direct=st.sampled_from([8, 100, 1000]),
    step=st.sampled_from([1, 7, 500, 8 << 20]),
)
def test_same_frames_as_frame_decoder(reader_class, sizes, reads, scratch, direct, step):
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    stream = b"".join(framing.frame(p) for p in payloads)
    reader = reader_class(scratch_bytes=scratch, direct_min=min(direct, scratch - 4), direct_step=step)
    assert read_all(reader, stream, reads) == payloads
    assert reader.pending == 0


def test_large_frame_lands_in_its_own_buffer(reader_class):
    payload = bytes(range(256)) * 400  # 100 KiB: above direct_min and the scratch buffer
    reader = reader_class(scratch_bytes=4096, direct_min=1024)
    stream = framing.frame(b"small") + framing.frame(payload) + framing.frame(b"after")
    frames = read_all(reader, stream, [4096])
    assert frames == [b"small", payload, b"after"]


def test_a_bare_size_header_does_not_allocate_the_whole_frame(reader_class):
    reader = reader_class(max_frame=100 << 20, direct_step=1 << 20)
    header = (100 << 20).to_bytes(4, "big")
    buffer = reader.get_buffer(-1)
    buffer[:4] = header
    assert reader.buffer_updated(4) == []
    assert len(reader.get_buffer(-1)) == 1 << 20


def test_frames_are_writable_bytearrays(reader_class):
    reader = reader_class()
    buffer = reader.get_buffer(-1)
    data = framing.frame(b"abc")
    buffer[:len(data)] = data
    (frame,) = reader.buffer_updated(len(data))
    assert isinstance(frame, bytearray) and frame == b"abc"


@pytest.mark.parametrize("size", [-1, -2**31, 1025])
def test_bad_sizes_are_rejected(reader_class, size):
    reader = reader_class(max_frame=1024)
    data = size.to_bytes(4, "big", signed=True) + b"x"
    buffer = reader.get_buffer(-1)
    buffer[:len(data)] = data
    with pytest.raises(ProtocolError, match=f"frame size {size} outside 0..1024"):
        reader.buffer_updated(len(data))


def test_a_buffer_still_held_is_never_resized_under_it(reader_class):
    """A large frame's buffer grows in get_buffer; a transport still holding the last one makes that
    fail (BufferError) rather than leave it pointing at memory the frame moved from."""
    reader = reader_class(scratch_bytes=64, direct_min=16, direct_step=8)
    buffer = reader.get_buffer(-1)
    data = framing.frame(b"x" * 40)[:12]  # the size, then 8 bytes: into a buffer of the frame's own (16 bytes)
    buffer[:len(data)] = data
    assert reader.buffer_updated(len(data)) == []
    held = reader.get_buffer(-1)  # the next 8 bytes: that buffer full after them
    held[:8] = b"y" * 8
    assert reader.buffer_updated(8) == []
    with pytest.raises(BufferError):
        reader.get_buffer(-1)
    del held
    assert len(reader.get_buffer(-1)) == 8


def test_a_compiled_reader_never_initialised_is_an_error_not_a_crash():
    reader = _frames.FrameReader.__new__(_frames.FrameReader)
    with pytest.raises(RuntimeError, match="__init__ was not called"):
        reader.get_buffer(-1)
    with pytest.raises(RuntimeError, match="__init__ was not called"):
        reader.buffer_updated(0)


def test_the_compiled_frame_split_equals_the_python_one():
    """protocol/_frames.c against framing.complete_frames: random runs of frames (empty ones, ones cut
    off at the end, sizes below 0 or above the limit) read from random starts and ends of a buffer give
    the same frames and resume point, or None where the Python one raises ProtocolError."""
    import random
    import struct

    from protocol import _frames, framing  # built by make test's `pip install -e .`
    from protocol.errors import ProtocolError

    assert framing._compiled_frames is _frames.complete_frames
    rng = random.Random(4)
    for _ in range(2000):
        data = bytearray()
        for _ in range(rng.randint(0, 6)):
            size = rng.choice([0, rng.randint(1, 40), rng.randint(40, 3000)])
            claimed = rng.choice([size] * 8 + [-1, -(2**31), 5000, 2**31 - 1])
            data += struct.pack(">i", claimed) + rng.randbytes(size)
        data += rng.randbytes(rng.randint(0, 6))
        view = memoryview(data)
        start = rng.randint(0, len(data))
        end = rng.randint(start, len(data))
        got = _frames.complete_frames(view, start, end, 4000)
        try:
            expected = framing.complete_frames(view, start, end, 4000)
        except ProtocolError:
            assert got is None
            continue
        assert got is not None and got == expected
        assert all(type(frame) is bytearray for frame in got[0])
