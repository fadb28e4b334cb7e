"""tests/support/jvm_cds.py: when a test JVM writes a class archive, maps one or neither, and which
archive files are kept (no JVM started here; tests/interop/test_jvm_cds.py runs real ones)."""

from __future__ import annotations

import os

import pytest

from tests.support import jvm_cds

OPTIONS = ["-XX:TieredStopAtLevel=1"]


@pytest.fixture
def jars(tmp_path, monkeypatch):
    monkeypatch.setattr(jvm_cds, "ARCHIVES", tmp_path / "cds")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.jar").write_bytes(b"a")
    return lib


def test_the_first_jvm_writes_the_archive_and_the_next_maps_it(jars):
    first = jvm_cds.sharing(OPTIONS, f"{jars}/*", "Main")
    assert first.writing is not None and f"-XX:ArchiveClassesAtExit={first.writing}" in first.options
    first.writing.write_bytes(b"archive")  # what the JVM writes at its exit
    assert not first.archive.exists()  # nobody maps it before the JVM has ended
    first.keep(0)
    assert first.archive.read_bytes() == b"archive" and not first.writing.exists()
    second = jvm_cds.sharing(OPTIONS, f"{jars}/*", "Main")
    assert second.writing is None and f"-XX:SharedArchiveFile={first.archive}" in second.options
    assert jvm_cds.QUIET in first.options and jvm_cds.QUIET in second.options
    second.keep(0)  # a JVM that mapped the archive leaves it be
    assert first.archive.read_bytes() == b"archive"


@pytest.mark.parametrize("returncode", [-9, None])  # SIGKILL; a JVM killed at a timeout
def test_a_killed_jvm_s_file_is_dropped_and_its_kind_not_written_again(jars, monkeypatch, returncode):
    monkeypatch.setattr(jvm_cds, "_GIVEN_UP", set(), raising=False)
    sharing = jvm_cds.sharing(OPTIONS, f"{jars}/*", "Main")
    assert sharing.writing is not None
    sharing.writing.write_bytes(b"half")
    sharing.keep(returncode)
    assert not sharing.writing.exists() and not sharing.archive.exists()
    assert jvm_cds.sharing(OPTIONS, f"{jars}/*", "Main").options == (jvm_cds.QUIET,)
    assert jvm_cds.sharing(OPTIONS, f"{jars}/*", "Other").writing is not None  # other kinds still are


def test_a_jvm_that_may_not_write_maps_nothing_until_there_is_an_archive(jars):
    sharing = jvm_cds.sharing(OPTIONS, f"{jars}/*", "Main", write=False)
    assert sharing.options == (jvm_cds.QUIET,) and sharing.writing is None


def test_another_jar_option_or_main_is_another_kind(jars):
    def archive(*, options=OPTIONS, main="Main"):
        return jvm_cds.sharing(options, f"{jars}/*", main, write=False).archive

    before = archive()
    assert archive(main="Other") != before and archive(options=["-Xmx1g"]) != before
    jar = jars / "a.jar"
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))  # a rebuilt jar
    assert archive() != before


def test_a_directory_on_the_class_path_shares_nothing(jars, tmp_path):
    classes = tmp_path / "classes"
    classes.mkdir()
    sharing = jvm_cds.sharing(OPTIONS, f"{classes}:{jars}/*", "Main")
    assert sharing.options == () and sharing.writing is None  # a JVM told to archive it would not start
