"""broker/log/slices.py: page-cache reads on the loop (RWF_NOWAIT), the rest in the pool; answers sent from
files, their missing pages brought into the page cache in the pool first."""

import asyncio
import os
import platform
import re
import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor

import pytest

from broker.log import FileSlice, page_cache
from broker.log import slices as slices_module
from broker.log.file_region import FileRegion
from broker.log.segment import SegmentFile
from broker.log.slices import SliceReader, _GroupRead
from tests.support.page_cache import drop_from_page_cache


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


# --- for_sending: FileRegions, and pages brought back into the page cache first ---------------------


def _kernel_predates_cachestat() -> bool:
    """Asked of the kernel's version, not of Ebb's own probe (broker/log/page_cache.py): a probe that broke
    would otherwise skip these tests instead of failing them."""
    found = re.match(r"(\d+)\.(\d+)", platform.release())
    return found is None or (int(found[1]), int(found[2])) < (6, 5)


needs_cachestat = pytest.mark.skipif(_kernel_predates_cachestat(),
                                     reason="a kernel before Linux 6.5 has no cachestat(2): nothing is sent from files")


class HookedExecutor(InlineExecutor):
    """Runs `before` on the caller's thread ahead of each job: what happens while a pool thread works."""

    def __init__(self, before):
        super().__init__()
        self.before = before

    def submit(self, fn, *args, **kwargs):
        self.before()
        return super().submit(fn, *args, **kwargs)


def pinned(groups):
    """The groups with each slice's file pinned once, as a Fetch's read leaves them for for_sending."""
    for group in groups:
        for piece in group:
            piece.file.pin()
    return groups


def region_bytes(region: FileRegion) -> bytes:
    return b"".join(os.pread(fd, length, position) for fd, position, length in region.pieces())


def cold_and_warm(files, tmp_path):
    """Two segment files of 100 KiB, the first taken out of the page cache, the second in it; one group
    from each, large enough (together) to be sent from files."""
    cold_data, warm_data = os.urandom(100_000), os.urandom(100_000)
    cold, warm = files("cold", cold_data), files("warm", warm_data)
    drop_from_page_cache(tmp_path / "cold")
    assert not page_cache.cached(cold.fileno(), 0, 100_000)
    assert page_cache.cached(warm.fileno(), 0, 100_000)
    groups = [[FileSlice(cold, 1000, 30_000), FileSlice(cold, 31_000, 40_000)], [], [FileSlice(warm, 5, 50_000)]]
    return cold, warm, groups, [cold_data[1000:71_000], b"", warm_data[5:50_005]]


@needs_cachestat
def test_a_group_out_of_the_page_cache_is_brought_in_and_sent_from_its_files(files, tmp_path):
    cold, warm, groups, wanted = cold_and_warm(files, tmp_path)
    pool, regions = InlineExecutor(), []
    answer = asyncio.run(SliceReader(pool).for_sending(pinned(groups), regions))
    assert isinstance(answer[0], FileRegion) and isinstance(answer[2], FileRegion) and len(pool.jobs) == 1
    assert sorted(map(id, regions)) == sorted([id(answer[0]), id(answer[2])])
    assert [region_bytes(answer[0]), bytes(answer[1]), region_bytes(answer[2])] == wanted
    assert page_cache.cached(cold.fileno(), 1000, 70_000)
    for region in regions:
        region.release()
    assert not any(f._pins for f in (cold, warm))


@needs_cachestat
@pytest.mark.parametrize("brought_in", [True, False])
def test_a_segment_deleted_while_its_pages_are_brought_in_stays_open_for_the_answer(files, tmp_path, monkeypatch,
                                                                                    brought_in):
    """The region's pin holds the file from the warm-up to the answer, or into the copy when the pages
    stay missing: a deleted segment is never let go in between (it would be closed for good, and a
    read of it refused)."""
    cold, warm, groups, wanted = cold_and_warm(files, tmp_path)
    if not brought_in:
        monkeypatch.setattr(slices_module, "_bring_into_page_cache", lambda pieces: None)

    def delete():  # as retention does: the file ended, its name gone
        if not cold.closed:
            (tmp_path / "cold").unlink()
            cold.close()

    regions = []
    answer = asyncio.run(SliceReader(HookedExecutor(delete)).for_sending(pinned(groups), regions))
    assert isinstance(answer[0], FileRegion if brought_in else memoryview)
    assert (region_bytes(answer[0]) if brought_in else bytes(answer[0])) == wanted[0]
    for region in regions:
        region.release()
    assert cold.fd == -1 and not warm._pins


@needs_cachestat
def test_pages_still_missing_after_being_brought_in_are_copied(files, tmp_path, monkeypatch):
    """Evicted again before the check (or the warming failed): that group alone is read and copied."""
    cold, warm, groups, wanted = cold_and_warm(files, tmp_path)
    monkeypatch.setattr(slices_module, "_bring_into_page_cache", lambda pieces: None)
    regions = []
    answer = asyncio.run(SliceReader(InlineExecutor()).for_sending(pinned(groups), regions))
    assert isinstance(answer[0], memoryview) and bytes(answer[0]) == wanted[0]
    assert regions == [answer[2]] and region_bytes(answer[2]) == wanted[2]
    regions[0].release()
    assert not any(f._pins for f in (cold, warm))


@needs_cachestat
def test_an_answer_cancelled_while_its_pages_are_brought_in_lets_its_files_go(files, tmp_path):
    cold, warm, groups, _ = cold_and_warm(files, tmp_path)

    class Stuck(Executor):
        def submit(self, fn, *args, **kwargs):
            return Future()  # never done

    async def cancelled():
        regions = []
        task = asyncio.ensure_future(SliceReader(Stuck()).for_sending(pinned(groups), regions))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for region in regions:  # the warm group's region, which the connection releases
            region.release()

    asyncio.run(cancelled())
    assert not any(f._pins for f in (cold, warm))


def _cancelled_while_the_pool_works(make_answer, held: SegmentFile, path, monkeypatch, name, real):
    """Run `make_answer(reader)` on a real one-thread pool whose `os.<name>` (`real`) blocks until the
    test lets it go; cancel the answer while it blocks, delete `held`'s segment as retention does, let
    the thread go on. Returns, for each call on `held`'s descriptor, whether it was still the file's open,
    pinned one."""
    entered, go = threading.Event(), threading.Event()
    seen: list[bool] = []

    def blocking(*args):
        if threading.current_thread() is threading.main_thread():
            return real(*args)
        entered.set()
        go.wait()
        seen.append(held.fd in args and held._pins > 0)
        return real(*args)

    monkeypatch.setattr(slices_module.os, name, blocking)
    pool = ThreadPoolExecutor(max_workers=1)

    async def cancelled():
        regions: list[FileRegion] = []
        task = asyncio.ensure_future(make_answer(SliceReader(pool), regions))
        await asyncio.to_thread(entered.wait)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for region in regions:
            region.release()
        path.unlink()
        held.close()
        go.set()
        await asyncio.to_thread(pool.shutdown)
        await asyncio.sleep(0)  # the release the thread's end scheduled on the loop

    asyncio.run(cancelled())
    return seen


@needs_cachestat
def test_an_answer_cancelled_while_a_thread_warms_its_files_keeps_them_open_until_the_thread_is_done(
        files, tmp_path, monkeypatch):
    """The cancelled task let its regions go at once: a segment deleted meanwhile closed its descriptor,
    and the thread then sent from a closed descriptor, or one reused for another file."""
    cold, warm, groups, _ = cold_and_warm(files, tmp_path)
    seen = _cancelled_while_the_pool_works(lambda reader, regions: reader.for_sending(pinned(groups), regions), cold,
                                           tmp_path / "cold", monkeypatch, "sendfile", os.sendfile)
    assert seen and all(seen)
    assert cold.fd == -1 and not any(f._pins for f in (cold, warm))


def test_a_read_cancelled_while_a_thread_reads_keeps_its_files_open_until_the_thread_is_done(
        files, tmp_path, monkeypatch):
    """The same for a copy: the files were unpinned while the thread still read them."""
    a = files("a", os.urandom(1000))
    monkeypatch.setattr(slices_module, "_NOWAIT", None)  # the read goes to the pool
    monkeypatch.setattr(slices_module, "INLINE_READ_BYTES", 0)
    seen = _cancelled_while_the_pool_works(lambda reader, regions: reader.read([[FileSlice(a, 0, 1000)]]), a,
                                           tmp_path / "a", monkeypatch, "preadv", os.preadv)
    assert seen and all(seen)
    assert a.fd == -1 and not a._pins


@needs_cachestat
def test_pages_are_brought_in_up_to_the_end_of_a_file_cut_short(files, tmp_path):
    """sendfile to /dev/null reads the pages in; a range past the end stops there without an error."""
    data = os.urandom(50_000)
    f = files("short", data)
    drop_from_page_cache(tmp_path / "short")
    fd = f.pin()
    try:
        slices_module._bring_into_page_cache([[(fd, 0, 20_000), (fd, 40_000, 30_000)]])
        assert page_cache.cached(fd, 0, 50_000)
    finally:
        f.unpin()


def _shape(answer_and_cold, regions):
    """What an answer of _regions_where_cached holds, as plain values."""
    def region(r):
        return ("region", r.slices, r.pieces(), r.length, r._pinned)

    answer, cold = answer_and_cold
    return ([region(a) if isinstance(a, FileRegion) else bytes(a) for a in answer],
            [(index, region(r)) for index, r in cold], [region(r) for r in regions])


def test_the_compiled_regions_loop_equals_the_python_one(files, monkeypatch):
    """broker/_file_send.c's regions against _regions_where_cached's Python loop: groups of slices (some
    empty, some with empty slices) over two files, a page-cache answer per (descriptor, position) that
    says yes, no or cannot tell (None); the same answer, cold groups and regions from both."""
    import random

    from broker import _file_send  # built by make test's `pip install -e .`

    assert slices_module._compiled_regions is _file_send.regions
    a, b = files("a", os.urandom(5000)), files("b", os.urandom(5000))
    rng = random.Random(5)
    for _ in range(300):
        groups = [tuple(FileSlice(rng.choice([a, b]), rng.randint(0, 4000), rng.choice([0, rng.randint(1, 900)]))
                        for _ in range(rng.choice([0, 1, 1, 2, 3]))) for _ in range(rng.randint(0, 6))]
        verdicts = {}

        def cached(fd, position, length, verdicts=verdicts):
            return verdicts.setdefault((fd, position, length), rng.choice([True, True, True, False, None]))

        monkeypatch.setattr(page_cache, "checker", lambda cached=cached: cached)
        made: list = []
        compiled = slices_module._regions_where_cached(groups, made)
        monkeypatch.setattr(slices_module, "_compiled_regions", None)
        python_made: list = []
        python = slices_module._regions_where_cached(groups, python_made)
        monkeypatch.setattr(slices_module, "_compiled_regions", _file_send.regions)
        assert _shape(compiled, made) == _shape(python, python_made)
    assert not a._pins and not b._pins  # the regions took over pins they were given; none here
