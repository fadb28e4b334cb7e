"""broker/file_sender.py and broker/log/page_cache.py on real descriptors: a socket pair whose reader
is slow (the sender waits for room), a file cut short under a region (an error, never a short answer),
and cachestat's answer before and after the file's pages are dropped. The sender's loop is tried both
compiled (broker/_file_send.c) and in Python (where that is not built)."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import threading
import time
import weakref

import pytest
import uvloop

from broker import _file_send, file_sender  # built by make test's `pip install -e .`
from broker.file_sender import FileSender, SegmentCutShort
from broker.log import FileSlice, page_cache
from broker.log.file_region import FileRegion
from broker.log.segment import SegmentFile
from tests.support.page_cache import drop_from_page_cache


@pytest.fixture(params=["compiled", "python"])
def pump(request, monkeypatch):
    """Which loop writes: the compiled one, or the Python one alone."""
    if request.param == "python":
        monkeypatch.setattr(file_sender, "_compiled_pump", None)
    else:
        assert file_sender._compiled_pump is _file_send.pump
    return request.param


@pytest.fixture
def segment(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    data = os.urandom(3 * 1024 * 1024 + 123)
    path.write_bytes(data)
    file = SegmentFile(path, os.open(path, os.O_RDWR))
    yield file, data
    file.close()


def _read_all(sock: socket.socket, size: int, slow: bool) -> bytes:
    got = bytearray()
    while len(got) < size:
        if slow:
            time.sleep(0.002)
        chunk = sock.recv(64 * 1024)
        if not chunk:
            break
        got += chunk
    return bytes(got)


def _connected(slow: bool, size: int) -> tuple[socket.socket, socket.socket, threading.Thread, list[bytes]]:
    """A loopback TCP connection with small buffers, its reading end read by a thread."""
    server = socket.create_server(("127.0.0.1", 0))
    reader = socket.create_connection(server.getsockname())
    writer, _ = server.accept()
    server.close()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    writer.setblocking(False)
    received: list[bytes] = []
    thread = threading.Thread(target=lambda: received.append(_read_all(reader, size, slow)))
    thread.start()
    return reader, writer, thread, received


def _send(chunks, size: int, *, slow: bool) -> tuple[bytes, list]:
    """Send the chunks through a FileSender on one end of a TCP connection; what the other end read,
    and what `finished` was called with ("at once" where send said all was in the socket)."""
    outcome: list = []

    async def main() -> bytes:
        reader, writer, thread, received = _connected(slow, size)
        done = asyncio.Event()
        sender = FileSender(asyncio.get_running_loop(), writer.fileno())
        if sender.send(chunks, lambda error: (outcome.append(error), done.set())):
            outcome.append("at once")
            done.set()
        await asyncio.wait_for(done.wait(), 30)
        assert not sender.busy
        sender.close()
        writer.close()  # the reader sees the end if the answer was cut short
        await asyncio.to_thread(thread.join, 30)
        reader.close()
        return received[0]

    return uvloop.run(main()), outcome


def test_bytes_and_file_ranges_arrive_in_order_through_a_full_socket(segment, pump):
    file, data = segment
    region = FileRegion([FileSlice(file, 100, 1_000_000), FileSlice(file, 2_000_000, 1_000_000)])
    chunks = [b"head", region, bytearray(b"middle"), FileRegion([FileSlice(file, 5, 70_000)]), b"tail"]
    expected = b"head" + data[100:1_000_100] + data[2_000_000:3_000_000] + b"middle" + data[5:70_005] + b"tail"
    got, outcome = _send(chunks, len(expected), slow=True)
    assert outcome == [None]
    assert got == expected
    region.release()


def test_an_answer_that_fits_the_socket_is_in_it_when_send_returns(segment, pump):
    """send says so, and never calls `finished` (the connection releases the regions itself)."""
    file, data = segment
    region = FileRegion([FileSlice(file, 10, 4000)])
    got, outcome = _send([b"head", region, b"tail"], 4 + 4000 + 4, slow=False)
    assert outcome == ["at once"]
    assert got == b"head" + data[10:4010] + b"tail"
    region.release()


def test_waits_for_room_register_nothing_with_the_loop(segment, pump, monkeypatch):
    """Two connections answered at once through full sockets, then closed and others made (descriptor
    numbers come back): every answer arrives whole, while the loop's add_writer is never called (the
    senders' sockets stay in the loop's one RoomWatch; registering a writer per wait costs uvloop eight
    system calls), and a closed sender leaves nothing in the watch."""
    file, data = segment
    writers: list[int] = []
    real_add_writer = uvloop.Loop.add_writer
    monkeypatch.setattr(uvloop.Loop, "add_writer", lambda loop, fd, *args: writers.append(fd)
                        or real_add_writer(loop, fd, *args))
    expected = b"head" + data[:2_000_000] + b"tail"

    async def answer_both() -> list[bytes]:
        connections = [_connected(True, len(expected)) for _ in range(2)]
        finished: list = []
        done = asyncio.Event()
        senders, regions = [], []
        for _, writer, _, _ in connections:
            region = FileRegion([FileSlice(file, 0, 2_000_000)])
            sender = FileSender(asyncio.get_running_loop(), writer.fileno())
            assert not sender.send([b"head", region, b"tail"], lambda error: (finished.append(error),
                                                                              len(finished) == 2 and done.set()))
            senders.append(sender)
            regions.append(region)
        await asyncio.wait_for(done.wait(), 30)
        assert finished == [None, None]
        for sender, region, (reader, writer, thread, _) in zip(senders, regions, connections, strict=True):
            sender.close()
            region.release()
            writer.close()
            await asyncio.to_thread(thread.join, 30)
            reader.close()
        assert file_sender.room_watch(asyncio.get_running_loop()).watched == 0
        return [received[0] for _, _, _, received in connections]

    async def main() -> list[bytes]:
        return await answer_both() + await answer_both()

    assert uvloop.run(main()) == [expected] * 4
    assert writers == []


def test_a_loop_with_a_room_watch_is_collected():
    """The loop's RoomWatch (in a weak mapping keyed by the loop) does not keep its loop, or its epoll's
    descriptor, alive once the loop is gone."""
    left, right = socket.socketpair()
    loop = uvloop.new_event_loop()

    async def main() -> None:
        FileSender(asyncio.get_running_loop(), left.fileno()).close()

    loop.run_until_complete(main())
    loop.close()
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None
    left.close()
    right.close()


def test_a_file_shorter_than_its_region_is_an_error(segment, pump):
    file, data = segment
    region = FileRegion([FileSlice(file, len(data) - 1000, 5000)])  # 4000 bytes past the end
    got, outcome = _send([b"head", region, b"tail"], 4 + 5000 + 4, slow=False)
    assert len(outcome) == 1 and isinstance(outcome[0], SegmentCutShort)
    assert got == b"head" + data[-1000:]  # what was there, then the connection ends: no "tail"
    region.release()


def test_a_socket_error_ends_the_answer_with_it(pump):
    reader, writer = socket.socketpair()
    reader.close()  # the peer is gone
    outcome: list = []

    async def main() -> None:
        sender = FileSender(asyncio.get_running_loop(), writer.fileno())
        assert not sender.send([b"head", b"tail"], outcome.append)
        assert not sender.busy
        sender.close()

    uvloop.run(main())
    writer.close()
    assert len(outcome) == 1 and isinstance(outcome[0], BrokenPipeError)


@pytest.mark.parametrize("pinned", [False, True])
def test_a_region_pins_its_files_until_released(segment, pinned):
    """A region pins each slice's file, or takes over the pins its caller took (a Fetch's read); either
    way they hold until it is released, once."""
    file, _ = segment
    slices = [FileSlice(file, 0, 10), FileSlice(file, 10, 10)]
    if pinned:
        for piece in slices:
            piece.file.pin()
    region = FileRegion(slices, pinned)
    assert file._pins == 2
    file.close()  # deleted meanwhile: the descriptor stays open while pinned
    fd = region.pieces()[0][0]
    assert os.pread(fd, 10, 0)
    region.release()
    region.release()  # twice is harmless
    assert file._pins == 0
    with pytest.raises(OSError):
        os.fstat(fd)


@pytest.mark.parametrize("how", ["compiled", "ctypes"])
def test_cachestat_sees_pages_come_and_go(tmp_path, monkeypatch, how):
    if how == "ctypes":
        monkeypatch.setattr(page_cache, "_KERNEL", page_cache._CacheStat(page_cache._CACHESTAT))
    else:
        assert page_cache._KERNEL.cached is _file_send.cached
    assert page_cache.available(), "this kernel has no cachestat(2) (Linux 6.5+): Fetch answers are copied"
    path = tmp_path / "cached"
    path.write_bytes(os.urandom(1 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.pread(fd, 1 << 20, 0)
        assert page_cache.cached(fd, 4096 + 17, 300_000)
        drop_from_page_cache(path)
        assert not page_cache.cached(fd, 4096 + 17, 300_000)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead: the first two pages only
        os.pread(fd, 8192, 0)
        assert page_cache.cached(fd, 0, 8192)
        assert not page_cache.cached(fd, 0, 8193)
    finally:
        os.close(fd)


def test_a_kernel_without_cachestat_is_found_by_the_probe():
    """The compiled check answers None where the call is missing or refused (ENOSYS, EPERM)."""
    assert not page_cache._CompiledCacheStat(lambda fd, position, length: None).working
    assert page_cache._CompiledCacheStat(lambda fd, position, length: False).working


def test_the_compiled_loop_refuses_a_position_outside_its_pieces():
    """The sender always passes a position inside its pieces; a wrong one must be an error, never bytes from
    past a buffer or a region sent to the client."""
    left, right = socket.socketpair()
    with left, right:
        for index, done in [(-1, 0), (0, -1), (0, 4)]:
            with pytest.raises(ValueError):
                _file_send.pump(left.fileno(), [b"abc"], index, done)
        with pytest.raises(ValueError):
            _file_send.pump(left.fileno(), [(right.fileno(), 0, 2)], 0, 3)
        assert _file_send.pump(left.fileno(), [b"abc", b"de"], 0, 1) == (2, 0, 0)
        assert right.recv(16) == b"bcde"


def test_the_compiled_release_of_sent_regions_equals_the_python_loop(tmp_path):
    """broker/log/_batch_read.c's release_regions against file_region.py's: regions of one and two
    slices, one released already, the bytes they held summed and every pin given back once."""
    from broker.log import _batch_read, file_region

    assert file_region.release_sent is _batch_read.release_regions

    def regions_of(name: str) -> tuple[list[FileRegion], list[SegmentFile]]:
        made = []
        for i in range(3):
            path = tmp_path / f"{name}{i}.log"
            path.write_bytes(os.urandom(5000))
            made.append(SegmentFile(path, os.open(path, os.O_RDWR)))
        regions = [FileRegion([FileSlice(made[0], 0, 100)]),
                   FileRegion([FileSlice(made[1], 10, 2000), FileSlice(made[2], 0, 0)]),
                   FileRegion([FileSlice(made[0], 200, 300), FileSlice(made[1], 0, 50)])]
        regions[2].release()
        return regions, made

    compiled, c_files = regions_of("c")
    python, p_files = regions_of("p")
    assert [f._pins for f in c_files] == [1, 1, 1]
    assert _batch_read.release_regions(compiled) == file_region.release_regions(python) == 2450
    assert [f._pins for f in c_files] == [f._pins for f in p_files] == [0, 0, 0]
    assert _batch_read.release_regions(compiled) == 2450  # released once: nothing more to give back
    assert [f._pins for f in c_files] == [0, 0, 0]
    for f in c_files + p_files:
        f.close()


def test_the_compiled_pieces_equal_the_python_ones(segment):
    """broker/_file_send.c's pieces against file_sender.pieces_of: an answer's chunks (bytes, bytearrays,
    empty ones, FileRegions with and without bytes) become the same pieces, in order."""
    import random

    file, _ = segment
    rng = random.Random(2)
    regions = [FileRegion([FileSlice(file, 0, 100), FileSlice(file, 500, 0)]), FileRegion([FileSlice(file, 9, 0)]),
               FileRegion([FileSlice(file, 1000, 7), FileSlice(file, 2000, 3000)])]

    def plain(pieces):
        return [bytes(p) if isinstance(p, memoryview) else p for p in pieces]

    for _ in range(200):
        chunks = [rng.choice([b"", b"head", bytearray(b"middle"), bytearray(), rng.randbytes(50),
                              rng.choice(regions)]) for _ in range(rng.randint(0, 6))]
        compiled = _file_send.pieces(chunks, FileRegion)
        assert all(type(p) in (memoryview, tuple) for p in compiled)
        assert plain(compiled) == plain(file_sender.pieces_of(chunks))
    for region in regions:
        region.release()
