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
