"""broker/log/_batch_read.c against its Python twin, broker/log/batch_read.py's read_batches: on segment
files of random batches, with a sparse offset index, a consumer's read on from where the last one
stopped gives the same answer from both (whole batches, the limits, KIP-74's first batch, where the
next read resumes and the header it keeps), read after read; anything else (another offset, a file cut
short, a header claiming too much) makes the compiled one step aside for the Python one, which words it."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import _batch_read, batch_read  # built by make test's `pip install -e .`
from broker.log.index import OffsetIndex
from broker.log.segment_file import CorruptSegmentError, OpenSegments
from protocol.records import build_batch, read_header

compiled = _batch_read.read_batches


def _segment(tmp_path, sizes: list[tuple[int, int]], index_every: int, seed: int):
    """A segment file of batches (records, value bytes), its index (an entry each `index_every` batches,
    as the log's interval would make) and each batch's (base offset, position, header)."""
    rng = random.Random(seed)
    index = OffsetIndex(tmp_path / "0.index", 0, 10_000)
    data = bytearray()
    batches = []
    offset = 0
    for n, (records, value) in enumerate(sizes):
        batch = build_batch([(None, rng.randbytes(value), [], 0) for _ in range(records)], base_offset=offset)
        header = read_header(batch)
        if n % index_every == index_every - 1:
            index.append(offset + records - 1, len(data))
        batches.append((offset, len(data), header))
        data += batch
        offset += records
    path = tmp_path / f"seg-{seed}.log"
    path.write_bytes(data)
    return path, len(data), index, batches


_sizes = st.lists(st.tuples(st.integers(1, 5), st.integers(0, 3000)), min_size=1, max_size=30)


@settings(max_examples=150)
@given(sizes=_sizes, index_every=st.integers(1, 4), seed=st.integers(0, 1000), data=st.data())
def test_reads_on_equal(tmp_path_factory, sizes, index_every, seed, data):
    tmp_path = tmp_path_factory.mktemp("seg")
    path, size, index, batches = _segment(tmp_path, sizes, index_every, seed)
    fd = os.open(path, os.O_RDONLY)
    try:
        i = data.draw(st.integers(0, len(batches) - 1))
        base, position, header = batches[i]
        resume = (base, position, data.draw(st.sampled_from([header, None])))
        for _ in range(4):  # read on, each read from where the one before stopped
            # up to Long.MAX too: the producer-state rebuild reads the rest of the log in one read
            max_bytes = data.draw(st.one_of(st.integers(0, 12_000), st.sampled_from([2**31 - 1, 2**63 - 1])))
            max_position = data.draw(st.sampled_from([size] + [p for _, p, _ in batches] + [size - 1]))
            min_one = data.draw(st.booleans())
            args = (fd, resume[0], max_bytes, max_position, min_one, size, resume, index)
            expected = batch_read.read_batches(*args)
            got = compiled(*args)
            assert got is not NotImplemented, (args, expected)
            assert got == expected
            if got is None or got[3][1] >= size:
                break
            resume = got[3]
            if got[3][2] is not None:
                assert type(got[3][2]) is type(header)
    finally:
        os.close(fd)


def test_a_read_of_the_rest_of_the_log_from_the_resume_point_reads_every_batch(tmp_path):
    """max_bytes of Long.MAX (the producer-state rebuild's read) added to the start position must not wrap."""
    path, size, index, batches = _segment(tmp_path, [(2, 10)] * 3, 10, 2)
    fd = os.open(path, os.O_RDONLY)
    try:
        base, position, header = batches[1]
        args = (fd, base, 2**63 - 1, size, True, size, (base, position, None), index)
        assert compiled(*args) == batch_read.read_batches(*args)
        assert compiled(*args)[:3] == (position, size - position, 6)
    finally:
        os.close(fd)


def test_steps_aside_off_the_resume_point(tmp_path):
    path, size, index, batches = _segment(tmp_path, [(3, 500)] * 10, 2, 1)
    fd = os.open(path, os.O_RDONLY)
    try:
        base, position, header = batches[4]
        for resume, offset in [((base, position, header), base + 1), ((-1, -1, None), base),
                               ((base, size, None), base)]:
            assert compiled(fd, offset, 2000, size, True, size, resume, index) is NotImplemented
            found = batch_read.read_batches(fd, offset, 2000, size, True, size, resume, index)
            assert found is not None and found[0] == position
    finally:
        os.close(fd)


@pytest.mark.parametrize("damage", ["cut", "claims_too_much", "claims_too_little"])
def test_bad_file_steps_aside_and_python_words_it(tmp_path, damage):
    path, size, index, batches = _segment(tmp_path, [(2, 800)] * 6, 1, 2)
    base, position, _ = batches[3]
    raw = bytearray(path.read_bytes())
    if damage == "cut":
        raw = raw[:position + 30]
    else:  # batch_length of the batch at `position`
        raw[position + 8:position + 12] = (10**7 if damage == "claims_too_much" else 10).to_bytes(4, "big")
    path.write_bytes(raw)
    fd = os.open(path, os.O_RDONLY)
    try:
        args = (fd, base, 4000, len(raw), True, len(raw), (base, position, None), index)
        assert compiled(*args) is NotImplemented
        with pytest.raises(CorruptSegmentError):
            batch_read.read_batches(*args)
    finally:
        os.close(fd)


def test_a_bad_header_in_the_walk_steps_aside(tmp_path):
    path, size, index, batches = _segment(tmp_path, [(2, 800)] * 6, 100, 3)
    base, position, header = batches[1]
    raw = bytearray(path.read_bytes())
    later = batches[3][1]
    raw[later + 8:later + 12] = (10**7).to_bytes(4, "big")
    path.write_bytes(raw)
    fd = os.open(path, os.O_RDONLY)
    try:
        args = (fd, base, 100_000, size, True, size, (base, position, header), index)
        assert compiled(*args) is NotImplemented
        with pytest.raises(CorruptSegmentError):
            batch_read.read_batches(*args)
    finally:
        os.close(fd)


def test_the_segment_uses_the_compiled_twin():
    assert batch_read.compiled_read_batches is compiled


# --- run_slices: SegmentRun.slices of a Fetch's pinned read, in one segment ---------------------------


async def test_run_slices_equal_to_the_python_run(tmp_path, monkeypatch):
    """A consumer's reads through a log of many small segments (reading on, jumping, bounded below the
    log end, at segment ends): the compiled call answers as SegmentRun.slices does, leaves the same
    resume point and the same pins, or steps aside before pinning anything."""
    from dataclasses import replace

    import broker.log.segment_run as segment_run_module
    from broker.log.opening import create_partition_log
    from tests.broker.test_log_support import SMALL, FakeClock, batch

    log = create_partition_log(tmp_path / "topic-0", replace(SMALL, segment_bytes=6000), clock=FakeClock())
    rng = random.Random(7)
    for i in range(120):
        await log.append(batch(rng.randint(1, 4), timestamp=1000 + i, value=rng.randbytes(rng.randint(10, 600))),
                         leader_epoch=3)
    log.update_high_watermark(log.log_end_offset)
    run = log._run
    segments = run.all()
    assert len(segments) > 5
    compiled_run = segment_run_module.compiled_run_slices
    assert compiled_run is _batch_read.run_slices
    end = log.log_end_offset

    def state():
        return [s._resume for s in segments], [s.file._pins for s in segments]

    def release(slices):
        for piece in slices:
            piece.file.unpin()

    offset, answered, stepped = 0, 0, 0
    for _ in range(600):
        max_bytes = rng.choice([rng.randint(0, 3000), rng.randint(3000, 20_000)])
        upper = end if rng.random() < 0.8 else rng.randint(offset, end)
        min_one = rng.random() < 0.7
        before = state()
        got = compiled_run(run._segments, run._bases, offset, max_bytes, upper, min_one)
        after = state()
        if got is not NotImplemented:
            release(got[0])
        monkeypatch.setattr(segment_run_module, "compiled_run_slices", None)
        for segment, resume in zip(segments, before[0], strict=True):
            segment._resume = resume
        expected = run.slices(offset, max_bytes, upper, min_one, pinned=True)
        monkeypatch.setattr(segment_run_module, "compiled_run_slices", compiled_run)
        if got is NotImplemented:
            stepped += 1
            assert after == before  # nothing pinned, no resume point moved
        else:
            answered += 1
            assert got == expected and state() == after
        release(expected[0])
        assert sum(state()[1]) == 0
        offset = expected[1] if expected[0] and rng.random() < 0.9 else rng.randint(0, end - 1)
    assert answered > 100 and stepped > 10


async def test_log_read_equal_to_the_python_read(tmp_path, monkeypatch):
    """PartitionLog.read(pinned=True) through the compiled log_read and through the Python read alone:
    a consumer's reads (to the high watermark, the log end, a last stable offset below it) give equal
    ReadInfos, resume points and pins, or step aside; out of range and offline it steps aside, pinning
    nothing, for the Python read to raise."""
    from dataclasses import replace

    import broker.log.log as log_module
    from broker.log import ReadBound
    from broker.log.common import LogError
    from broker.log.opening import create_partition_log
    from tests.broker.test_log_support import SMALL, FakeClock, batch

    log = create_partition_log(tmp_path / "topic-0", replace(SMALL, segment_bytes=8000), clock=FakeClock())
    rng = random.Random(9)
    for i in range(100):
        await log.append(batch(rng.randint(1, 4), timestamp=1000 + i, value=rng.randbytes(rng.randint(10, 600))),
                         leader_epoch=3)
    end = log.log_end_offset
    log.update_high_watermark(end - 7)
    compiled_read = log_module.compiled_log_read
    assert compiled_read is _batch_read.log_read
    segments = log._run.all()

    def state():
        return [s._resume for s in segments], [s.file._pins for s in segments]

    def release(info):
        for piece in info.slices:
            piece.file.unpin()

    offset, answered = 0, 0
    for _ in range(500):
        max_bytes = rng.randint(0, 12_000)
        bound = rng.choice([ReadBound.HIGH_WATERMARK, ReadBound.LOG_END])
        max_offset = rng.choice([None, None, rng.randint(0, end)])
        min_one = rng.random() < 0.7
        before = state()
        got = compiled_read(log, offset, max_bytes, bound is ReadBound.HIGH_WATERMARK, min_one, max_offset)
        after = state()
        if got is not NotImplemented:
            release(got)
        for segment, resume in zip(segments, before[0], strict=True):
            segment._resume = resume
        monkeypatch.setattr(log_module, "compiled_log_read", None)
        expected = log.read(offset, max_bytes, bound=bound, min_one_batch=min_one, max_offset=max_offset,
                            pinned=True)
        monkeypatch.setattr(log_module, "compiled_log_read", compiled_read)
        if got is NotImplemented:
            assert after == before
        else:
            answered += 1
            assert got == expected and type(got) is type(expected) and state() == after
        release(expected)
        assert sum(state()[1]) == 0
        offset = expected.next_offset if expected.slices and rng.random() < 0.9 else rng.randint(0, end)
    assert answered > 150
    for offset in (end + 1, -1):
        assert compiled_read(log, offset, 1000, True, True, None) is NotImplemented
        with pytest.raises(LogError):
            log.read(offset, 1000, pinned=True)
    log.offline_reason = "a test"
    assert compiled_read(log, 0, 1000, True, True, None) is NotImplemented
    assert sum(state()[1]) == 0


class _FailingUnpin(OpenSegments):
    """A budget whose unpin fails (a close meeting EIO)."""

    def unpin(self, file):
        raise OSError(5, "EIO from close")


async def _one_segment_log(path):
    """A log of one segment, read on from its start, its file on a budget whose unpin fails."""
    from dataclasses import replace

    from broker.log.opening import create_partition_log
    from tests.broker.test_log_support import SMALL, FakeClock, batch

    log = create_partition_log(path, replace(SMALL, segment_bytes=60_000), clock=FakeClock())
    for _ in range(5):
        await log.append(batch(2), leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)
    segment = log._run.all()[0]
    segment._resume = (0, 0, None)
    _move(segment.file, _FailingUnpin(0))
    return log, segment


def _move(file, budget):
    """The open, idle `file` counted by `budget` (past its capacity of 0), no longer by its own."""
    file.budget._idle.pop(file)
    file.budget.open_count -= 1
    budget.open_count += 1
    budget._idle[file] = None
    file.budget = budget


async def test_a_failed_unpin_is_raised_as_the_python_run_raises_it(tmp_path, monkeypatch):
    """A read whose next batch does not fit lets its pin go; when that unpin fails, the compiled run
    raises the unpin's error, as SegmentRun.slices does, not an answer with an error left set."""
    import broker.log.segment_run as segment_run_module

    log, segment = await _one_segment_log(tmp_path / "t-0")
    run = log._run
    with pytest.raises(OSError, match="EIO from close"):
        _batch_read.run_slices(run._segments, run._bases, 0, 0, log.log_end_offset, False)
    monkeypatch.setattr(segment_run_module, "compiled_run_slices", None)
    segment.file._pins = 0
    segment.file.budget._idle[segment.file] = None
    with pytest.raises(OSError, match="EIO from close"):
        run.slices(0, 0, log.log_end_offset, False, pinned=True)


async def test_a_failed_unpin_takes_the_log_offline_as_the_python_read_does(tmp_path, monkeypatch):
    """Through PartitionLog.read, the compiled read's failed unpin is the partition's StorageError and
    takes it offline, as the Python read's is (a raw OSError escaped, then it was dropped for a second read)."""
    import broker.log.log as log_module
    from broker.log.common import StorageError

    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(log_module, "compiled_log_read", None)
        log, _ = await _one_segment_log(tmp_path / f"t-{int(compiled)}")
        with pytest.raises(StorageError) as raised:
            log.read(0, 0, min_one_batch=False, pinned=True)
        assert isinstance(raised.value.__cause__, OSError)
        assert log.offline_reason == "read: OSError(5, 'EIO from close')"


class _PinInterrupted(OpenSegments):
    """A budget whose first pin of a parked file raises what a signal handler raised meanwhile."""

    interrupted = False

    def pin(self, file):
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        return super().pin(file)


async def test_an_error_that_is_no_step_aside_is_raised_not_retried(tmp_path, monkeypatch):
    """The compiled read steps aside only where it cannot answer: an exception of its pin (here a
    signal handler's) is raised as the Python read raises it, not dropped for a second read."""
    import broker.log.log as log_module

    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(log_module, "compiled_log_read", None)
        log, segment = await _one_segment_log(tmp_path / f"t-{int(compiled)}")
        _move(segment.file, _PinInterrupted(0))
        with pytest.raises(KeyboardInterrupt):
            log.read(0, 10**6, pinned=True)
        assert segment.file._pins == 0 and log.offline_reason is None


LONG_MAX = 2**63 - 1


def test_a_batch_ending_at_long_max_reads_as_the_python_read(tmp_path):
    """A batch whose last offset is Long.MAX_VALUE: the next offset, 2**63, does not fit a C long long.
    The compiled read steps aside for it (the first batch, or one its walk meets) and the Python read
    answers; before, it wrapped to -2**63."""
    from protocol.records import build_batch

    first = build_batch([(None, b"v", [], 0)] * 3, base_offset=LONG_MAX - 5)
    last = build_batch([(None, b"v", [], 0)] * 3, base_offset=LONG_MAX - 2)
    path = tmp_path / "s.log"
    path.write_bytes(first + last)
    size = len(first + last)
    fd = os.open(path, os.O_RDONLY)
    try:
        index = OffsetIndex(tmp_path / "s.index", 0, 100)
        for offset, position in ((LONG_MAX - 5, 0), (LONG_MAX - 2, len(first))):
            args = (fd, offset, 10**6, size, True, size, (offset, position, None), index)
            expected = batch_read.read_batches(*args)
            assert expected[2] == 2**63
            assert compiled(*args) is NotImplemented
    finally:
        os.close(fd)


def test_offsets_past_long_max_step_aside(tmp_path):
    """A segment's next offset, a log's end or high watermark or a last stable offset of 2**63 (after a
    batch ending at Long.MAX_VALUE) make run_slices and log_read step aside for the Python code, which
    holds them as they are, instead of failing with OverflowError."""
    from types import SimpleNamespace

    segment = SimpleNamespace(next_offset=2**63, size=100, _resume=(2**63, 100, None))
    assert _batch_read.run_slices([segment], [LONG_MAX - 2], LONG_MAX - 2, 1000, 2**63, True) is NotImplemented
    log = SimpleNamespace(offline_reason=None, _run=SimpleNamespace(_segments=[segment], _bases=[LONG_MAX - 2]),
                          _log_start_offset=0, _high_watermark=2**63)
    assert _batch_read.log_read(log, LONG_MAX - 2, 1000, True, True, None) is NotImplemented
    segment.next_offset = LONG_MAX
    assert _batch_read.run_slices([segment], [LONG_MAX - 2], LONG_MAX - 2, 1000, 2**63, True) is NotImplemented
    log._high_watermark = LONG_MAX
    log._log_start_offset = LONG_MAX - 1  # the read is out of range: no segment's file is reached
    assert _batch_read.log_read(log, LONG_MAX - 2, 1000, True, True, 2**63) is NotImplemented


async def test_a_read_going_on_into_the_next_segment_opens_a_parked_file_once(tmp_path, monkeypatch):
    """With every idle file parked, a Fetch's read from a segment's last batch on into the next ones
    opens each file once, as the Python read does: the compiled read sees before its pin that it will
    step aside, not after (it opened the first file, closed it and left it to be opened again, twice)."""
    from dataclasses import replace

    import broker.log.log as log_module
    import broker.log.segment_run as segment_run_module
    from broker.log.opening import create_partition_log
    from broker.log.segment_file import OPEN_SEGMENTS
    from tests.broker.test_log_support import SMALL, FakeClock, batch

    log = create_partition_log(tmp_path / "t-0", replace(SMALL, segment_bytes=4000), clock=FakeClock())
    for _ in range(20):
        await log.append(batch(2, value=b"v" * 300), leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)
    first = log._run.all()[0]
    log.read(0, 3000)  # a consumer's read stops at the first segment's last batch
    resume = first._resume
    assert 0 < resume[1] < first.size
    opens = []
    capacity = OPEN_SEGMENTS.capacity
    try:
        OPEN_SEGMENTS.resize(0)
        for compiled in (True, False):
            if not compiled:
                monkeypatch.setattr(log_module, "compiled_log_read", None)
                monkeypatch.setattr(segment_run_module, "compiled_run_slices", None)
            first._resume = resume
            before = OPEN_SEGMENTS.reopened
            info = log.read(resume[0], 10**6, pinned=True)
            opens.append(OPEN_SEGMENTS.reopened - before)
            for piece in info.slices:
                piece.file.unpin()
    finally:
        OPEN_SEGMENTS.resize(capacity)
    assert opens[0] == opens[1] == len(info.slices) > 1
