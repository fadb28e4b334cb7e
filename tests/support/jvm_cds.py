"""Class data sharing (CDS) for the tests' JVMs: Kafka nodes and their format, Kafka's clients and tools.

A test JVM spends most of its short life loading and verifying classes. One started with an archive
of the classes an earlier JVM of the same kind loaded (a dynamic CDS archive, JDK 13+) maps them
instead: on JDK 17 here, a Kafka node's start and a tool's call took about 35-40% less CPU
(/usr/bin/time, user + sys). Nothing else about the JVM changes.

    sharing = jvm_cds.sharing(options, classpath, main)
    run([..."java", *options, *sharing.options, "-cp", classpath, main, ...])
    sharing.keep(returncode)        # once the JVM has ended

The first JVM of a kind writes the archive as it exits, to a name of its own; `keep` moves the file
into place once that JVM has ended (killed JVMs' files are dropped), so no JVM ever maps a half-written
archive. A kind is the java binary, the options, the class path's jars and the main class, by digest:
a rebuilt jar or another option gets an archive of its own instead of one the JVM would refuse.
A class path with a directory on it shares nothing (CDS archives classes from jars only).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

ARCHIVES = Path(__file__).resolve().parents[1] / "interop" / "java" / "target" / "cds"
# CDS writes its warnings (a class it cannot archive, an archive it cannot map) to stdout, which
# tests read: off, so that a JVM prints the same with an archive, without one or while writing one.
QUIET = "-Xlog:cds*=off"
# Kinds whose writing JVM was killed in this run: not tried again (a JVM that has to be killed
# would be killed again, after the same wait)
_GIVEN_UP: set[Path] = set()


@dataclass(frozen=True)
class Sharing:
    options: tuple[str, ...]  # the JVM options that map the archive or write it
    archive: Path
    writing: Path | None  # where this JVM writes the archive at its exit; None when it maps one

    def keep(self, returncode: int | None) -> None:
        """After the JVM ended with `returncode`: the archive it wrote becomes the kind's. A JVM killed
        (SIGKILL) may have stopped in the middle of writing, so its file is dropped."""
        if self.writing is None or not self.writing.exists():
            return
        if returncode is not None and returncode != -9:
            os.replace(self.writing, self.archive)  # atomic: a JVM maps the old file or the new one
        else:
            self.writing.unlink()
            _GIVEN_UP.add(self.archive)


def sharing(options: list[str], classpath: str, main: str, *, write: bool = True) -> Sharing:
    """The sharing options for `java *options -cp classpath main`; `write`: whether this JVM may write
    the archive when there is none (only where the caller sees it end and calls `keep`)."""
    archive = ARCHIVES / f"{_kind(options, classpath, main)}.jsa"
    if any(Path(entry).is_dir() for entry in classpath.split(os.pathsep)):
        return Sharing((), archive, None)  # CDS takes jars only: a JVM asked to archive a directory fails
    if archive.exists():
        return Sharing((QUIET, f"-XX:SharedArchiveFile={archive}"), archive, None)
    if not write or archive in _GIVEN_UP:
        return Sharing((QUIET,), archive, None)
    ARCHIVES.mkdir(parents=True, exist_ok=True)
    writing = archive.with_name(f"{archive.stem}.{uuid.uuid4().hex}.part")
    return Sharing((QUIET, f"-XX:ArchiveClassesAtExit={writing}"), archive, writing)


def _kind(options: list[str], classpath: str, main: str) -> str:
    digest = hashlib.sha256()
    java = os.path.realpath(shutil.which("java") or "java")
    for word in (java, _stamp(Path(java)), *options, main):
        digest.update(word.encode() + b"\0")
    for entry in classpath.split(os.pathsep):
        jars = sorted(Path(entry[:-2]).glob("*.jar")) if entry.endswith("/*") else [Path(entry)]
        for jar in jars:
            digest.update(f"{jar}\0{_stamp(jar)}\0".encode())
    return f"{main.rsplit('.', 1)[-1]}-{digest.hexdigest()[:16]}"


def _stamp(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return "missing"
    return f"{stat.st_size}:{stat.st_mtime_ns}"
