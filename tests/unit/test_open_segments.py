"""OpenSegments, the process's budget of idle segment files: least recently used idle files are
closed past the capacity and opened again at their next use; held files are never closed; an ended
file is never opened again."""

from __future__ import annotations

import os

import pytest

from broker.log.segment_file import OpenSegments, SegmentFile


@pytest.fixture
def files(tmp_path):
    def make(budget: OpenSegments, count: int) -> list[SegmentFile]:
        made = []
        for i in range(count):
            path = tmp_path / f"{i:020d}.log"
            path.write_bytes(f"file {i}".encode())
            made.append(SegmentFile(path, os.open(path, os.O_RDWR | os.O_APPEND), budget))
        return made
    return make


def is_open(file: SegmentFile) -> bool:
    return file.fd >= 0


def read(file: SegmentFile) -> bytes:
    with file.held() as fd:
        return os.pread(fd, 100, 0)


def test_the_least_recently_used_idle_files_are_closed_past_the_capacity(files):
    budget = OpenSegments(2)
    a, b, c = files(budget, 3)
    assert [is_open(f) for f in (a, b, c)] == [False, True, True] and budget.open_count == 2
    assert read(a) == b"file 0"  # opened again, by path; b is now the oldest idle file
    assert [is_open(f) for f in (a, b, c)] == [True, False, True] and budget.reopened == 1
    read(c)
    read(b)
    assert [is_open(f) for f in (a, b, c)] == [False, True, True]


def test_held_files_stay_open_beyond_the_capacity_and_are_closed_when_let_go(files):
    budget = OpenSegments(1)
    a, b, c = files(budget, 3)
    fds = [a.pin(), b.pin(), c.pin()]
    assert all(is_open(f) for f in (a, b, c)) and budget.open_count == 3
    assert [os.pread(fd, 100, 0) for fd in fds] == [b"file 0", b"file 1", b"file 2"]
    a.unpin()
    b.unpin()
    assert [is_open(f) for f in (a, b, c)] == [False, False, True]  # c is held: nothing else fits
    c.unpin()
    assert [is_open(f) for f in (a, b, c)] == [False, False, True] and budget.open_count == 1


def test_appends_after_a_reopen_still_go_to_the_end(files):
    budget = OpenSegments(1)
    a, b = files(budget, 2)
    with a.held() as fd:
        os.write(fd, b"+more")
    assert read(a) == b"file 0+more" and not is_open(b)


def test_an_ended_file_closes_once_let_go_and_never_opens_again(files):
    budget = OpenSegments(4)
    a, b = files(budget, 2)
    a.pin()
    a.close()
    assert is_open(a) and a.closed  # ended, but open while held
    a.unpin()
    assert not is_open(a) and a.closed and budget.open_count == 1
    with pytest.raises(ValueError, match="is closed"):
        a.pin()
    b.close()
    b.close()  # twice is harmless
    assert budget.open_count == 0


def test_a_renamed_file_is_opened_again_by_its_new_path(files, tmp_path):
    budget = OpenSegments(1)
    a, b = files(budget, 2)
    moved = a.path.with_name(a.path.name + ".deleted")
    os.rename(a.path, moved)
    a.path = moved
    assert read(a) == b"file 0"


def test_shrinking_the_capacity_closes_idle_files_at_once(files):
    budget = OpenSegments(10)
    made = files(budget, 5)
    budget.resize(2)
    assert budget.open_count == 2 and [is_open(f) for f in made] == [False, False, False, True, True]


# --- the compiled pin and unpin (broker/log/_batch_read.c) against these methods ------------------


def _budget_state(budget: OpenSegments, files: list[SegmentFile]):
    return (budget.open_count, budget.reopened, [files.index(f) for f in budget._idle],
            [(is_open(f), f._pins, f._close_wanted, f._ended) for f in files])


@pytest.mark.parametrize("seed", range(12))
def test_compiled_pin_and_unpin_keep_the_budget_as_the_methods_do(tmp_path, seed):
    """Two budgets of six files, one pinned and unpinned through the compiled calls, the other through
    OpenSegments' methods, take the same 400 random pins, unpins, ends, resizes and reads: the whole
    state (counts, the idle order, each file's descriptor, pins and end) is equal after every step."""
    import random

    from broker.log import _batch_read  # built by make test's `pip install -e .`

    rng = random.Random(seed)
    sides = []
    for side in ("compiled", "python"):
        budget = OpenSegments(rng.randint(0, 4) if side == "compiled" else sides[0][0].capacity)
        made = []
        for i in range(6):
            path = tmp_path / f"{side}-{i}.log"
            path.write_bytes(b"x")
            made.append(SegmentFile(path, os.open(path, os.O_RDWR | os.O_APPEND), budget))
        sides.append((budget, made))
    for step in range(400):
        op = rng.choice(["pin", "pin", "unpin", "unpin", "end", "resize", "read"])
        i = rng.randrange(6)
        size = rng.randint(0, 4)
        results = []
        for (budget, made), compiled in zip(sides, (True, False), strict=True):
            file = made[i]
            try:
                if op == "pin":
                    fd = _batch_read.pin(budget, file) if compiled else budget.pin(file)
                    results.append(fd >= 0 and fd == file.fd)
                elif op == "unpin":
                    if file._pins > 0:
                        (_batch_read.unpin if compiled else OpenSegments.unpin)(budget, file)
                elif op == "end":
                    budget.end(file)
                elif op == "resize":
                    budget.resize(size)
                else:
                    results.append(read(file))
            except ValueError as exc:  # a pin of an ended file
                results.append(type(exc).__name__)
        assert results[:len(results) // 2] == results[len(results) // 2:], (step, op, i)
        assert _budget_state(*sides[0]) == _budget_state(*sides[1]), (step, op, i)
    for budget, made in sides:
        for file in made:
            while file._pins:
                budget.unpin(file)
            budget.end(file)
