"""A small real filesystem for a test that fills its disk: a tmpfs mounted by root (CI runs as root).
A test that needs one fails loudly when it cannot mount it: skipping would hide the feature breaking."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def small_filesystem(mount_point: Path, size: str, *, inodes: int | None = None) -> Iterator[Path]:
    """Mount a tmpfs of `size` ("64m"), and of `inodes` files at most, on `mount_point` (created)
    for the duration of the block."""
    mount_point.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (f",nr_inodes={inodes}" if inodes is not None else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    assert mounted.returncode == 0, f"this test needs a small real filesystem (root may mount a tmpfs): " \
                                    f"{mounted.stderr.strip()}"
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def fill_to_the_last_byte(directory: Path) -> Path:
    """A file `filler` that takes every free byte of the filesystem, as another program would."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (1 << 20, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)
    assert free_bytes(directory) < 8192, free_bytes(directory)
    return filler
