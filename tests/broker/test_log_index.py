"""Offset and time indexes: Kafka's binary layout, lookups, truncation, incremental persistence."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.log.index import CorruptIndexError, OffsetIndex, TimeIndex


def persist(index: OffsetIndex | TimeIndex) -> None:
    pending = index.prepare_persist()
    if pending is not None:
        pending.run()
        pending.done()


def test_offset_index_layout_and_lookup(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1000)
    for offset, position in [(104, 300), (110, 700), (121, 1200)]:
        index.append(offset, position)
    persist(index)
    raw = index.path.read_bytes()
    assert raw == struct.pack(">iiiiii", 4, 300, 10, 700, 21, 1200)  # relative offset, position
    assert index.lookup(99) == (100, 0)
    assert index.lookup(103) == (100, 0)
    assert index.lookup(104) == (104, 300)
    assert index.lookup(115) == (110, 700)
    assert index.lookup(10**9) == (121, 1200)
    assert index.lookup_position(699) == 300
    assert index.lookup_position(700) == 700
    assert index.lookup_position(5) == 0
    with pytest.raises(ValueError):
        index.append(121, 1300)  # offsets must grow

    reloaded = OffsetIndex(index.path, 100, 1000)
    reloaded.load()
    assert reloaded.entries() == index.entries()


def test_offset_index_truncate_and_persist_again(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 1000)
    for i in range(1, 6):
        index.append(i * 10, i * 100)
    persist(index)
    index.truncate_to(30)  # drops entries for batches ending at or above 30
    assert index.entries() == [(10, 100), (20, 200)]
    index.append(35, 250)
    persist(index)
    assert index.path.read_bytes() == struct.pack(">iiiiii", 10, 100, 20, 200, 35, 250)


def test_truncation_during_a_persist_is_redone(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 1000)
    for i in range(1, 4):
        index.append(i, i * 100)
    pending = index.prepare_persist()
    assert pending is not None
    index.truncate_to(2)  # while the write "runs"
    index.append(5, 500)
    pending.run()
    pending.done()
    persist(index)
    reloaded = OffsetIndex(index.path, 0, 1000)
    reloaded.load()
    assert reloaded.entries() == [(1, 100), (5, 500)]


def test_time_index_layout_lookup_and_monotonic_appends(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000050.timeindex", 50, 100)
    index.maybe_append(1000, 52)
    index.maybe_append(1000, 55)  # not above the last timestamp: ignored
    index.maybe_append(900, 56)  # likewise
    index.maybe_append(2000, 60)
    persist(index)
    assert index.path.read_bytes() == struct.pack(">qiqi", 1000, 2, 2000, 10)
    assert index.lookup(999) == (-1, 50)
    assert index.lookup(1000) == (1000, 52)
    assert index.lookup(1999) == (1000, 52)
    assert index.lookup(5000) == (2000, 60)
    assert index.last_entry == (2000, 60)
    index.truncate_to(60)
    assert index.last_entry == (1000, 52)


def test_damaged_index_files(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(b"\0" * 12)  # not a multiple of 8
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 100).load()
    path.write_bytes(struct.pack(">iiii", 5, 100, 3, 200))  # offsets go backwards
    index = OffsetIndex(path, 0, 100)
    index.load()
    with pytest.raises(CorruptIndexError):
        index.check(segment_size=1000)
    path.write_bytes(struct.pack(">ii", 5, 5000))  # position past the end of the segment
    index = OffsetIndex(path, 0, 100)
    index.load()
    with pytest.raises(CorruptIndexError):
        index.check(segment_size=1000)


def test_index_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 2)
    index.append(1, 10)
    assert not index.is_full
    index.append(2, 20)
    assert index.is_full


def test_an_index_retired_while_its_first_write_creates_the_file_leaves_no_file(tmp_path, monkeypatch):
    """The segment is retired (then renamed for deletion) between the write's check and its create of a new
    index file: the rename found no file to take, so the write must remove the one it made."""
    import os

    from broker.log import index as index_module
    from broker.log.index import OffsetIndex

    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 100)
    index.append(0, 0)
    pending = index.prepare_persist()
    assert pending is not None and not path.exists()
    real_open = os.open

    def open_then_retire(file, flags, *args):
        fd = real_open(file, flags, *args)
        if flags & os.O_CREAT:
            index.retired = True  # the loop retires it now; its rename runs meanwhile and finds nothing
        return fd

    monkeypatch.setattr(index_module.os, "open", open_then_retire)
    pending.run()
    assert not path.exists()
