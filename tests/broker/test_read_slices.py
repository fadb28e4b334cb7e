"""broker/log/slices.py: page-cache reads on the loop (RWF_NOWAIT), the rest in the pool."""

import asyncio
import os
from concurrent.futures import Executor, Future

import pytest

from broker.log import FileSlice
from broker.log import slices as slices_module
from broker.log.segment import SegmentFile
from broker.log.slices import SliceReader, _GroupRead


class InlineExecutor(Executor):
    """Runs each job at once on the caller's thread, and remembers it."""

    def __init__(self):
        self.jobs = []

    def submit(self, fn, *args, **kwargs):
        self.jobs.append(fn)
        future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


@pytest.fixture
def files(tmp_path):
    opened = []

    def make(name: str, data: bytes) -> SegmentFile:
        path = tmp_path / name
        path.write_bytes(data)
        f = SegmentFile(path, os.open(path, os.O_RDONLY))
        opened.append(f)
        return f

    yield make
    for f in opened:
        f.close()


def groups_of(a: SegmentFile, b: SegmentFile):
    return [
        [FileSlice(a, 10, 100), FileSlice(b, 0, 50)],
        [],
        [FileSlice(b, 900, 200)],  # b has 1000 bytes: cut short at 100
        [FileSlice(b, 2000, 10), FileSlice(a, 0, 5)],  # past the end: nothing, and the group stops
        [FileSlice(a, 500, 300)],
    ]


def expected(a_data: bytes, b_data: bytes) -> list[bytes]:
    return [a_data[10:110] + b_data[:50], b"", b_data[900:1000], b"", a_data[500:800]]


@pytest.mark.parametrize("flags", [0, getattr(os, "RWF_NOWAIT", 0)])
def test_fill_reads_every_group(files, flags):
    a_data, b_data = os.urandom(1000), os.urandom(1000)
    a, b = files("a", a_data), files("b", b_data)
    groups = groups_of(a, b)
    read = _GroupRead(groups, sum(s.length for g in groups for s in g))
    assert read.fill(flags)
    assert [bytes(v) for v in read.views()] == expected(a_data, b_data)


def test_a_read_not_in_the_page_cache_goes_on_in_the_pool(files, monkeypatch):
    a_data, b_data = os.urandom(1000), os.urandom(1000)
    a, b = files("a", a_data), files("b", b_data)
    real = os.preadv
    calls = []

    def preadv(fd, buffers, offset, flags=0):
        calls.append(flags)
        if flags and len(calls) >= 2:  # the second non-blocking read finds nothing cached
            raise BlockingIOError(11, "would block")
        if flags:  # and the first one gets only part of its slice
            return real(fd, [buffers[0][:7]], offset, 0)
        return real(fd, buffers, offset, flags)

    monkeypatch.setattr(slices_module.os, "preadv", preadv)
    monkeypatch.setattr(slices_module, "_NOWAIT", 8)
    pool = InlineExecutor()
    views = asyncio.run(SliceReader(pool).read(groups_of(a, b)))
    assert [bytes(v) for v in views] == expected(a_data, b_data)
    assert calls[:2] == [8, 8] and all(f == 0 for f in calls[2:]) and len(pool.jobs) == 1
    assert not any(f._pins for f in (a, b))


def test_nothing_to_read(files):
    pool = InlineExecutor()
    assert [bytes(v) for v in asyncio.run(SliceReader(pool).read([[], []]))] == [b"", b""]
    assert pool.jobs == []
