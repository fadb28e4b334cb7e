"""A real filesystem that can be made to fail and heal, for the log dir failure tests: ext4 (no
journal, errors=remount-ro) on a loop device whose image lives on a tmpfs. `fail()` raises an ext4
error, which turns the filesystem read-only at once under open files (writes then get EROFS, as
after a real metadata I/O error); `heal()` is what an operator does after checking the disk: the
broken mount is detached and the image mounted again, fresh, at the same place. Root is needed;
a test that cannot set it up fails loudly (skipping would hide the feature breaking)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.polling import wait_for
from tests.support.small_disk import small_filesystem


def _run(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, f"this test needs {command[0]} as root: {' '.join(command)}: {done.stderr.strip()}"
    return done.stdout.strip()


class FailingDisk:
    def __init__(self, image: Path, mount_point: Path) -> None:
        self.image = image
        self.mount_point = mount_point
        self.devices: list[str] = []

    def _mount(self) -> None:
        device = _run("losetup", "--find", "--show", str(self.image))
        self.devices.append(device)
        _run("mount", "-t", "ext4", "-o", "errors=remount-ro", device, str(self.mount_point))

    @property
    def read_only(self) -> bool:
        try:
            os.close(os.open(self.mount_point / "write-check", os.O_WRONLY | os.O_CREAT, 0o644))
        except OSError as exc:
            assert exc.errno == errno.EROFS, exc
            return True
        os.unlink(self.mount_point / "write-check")
        return False

    def fail(self) -> None:
        """Flush what is written (it was on the disk before it failed), then fail the filesystem."""
        os.sync()
        device = Path(self.devices[-1]).name
        Path(f"/sys/fs/ext4/{device}/trigger_fs_error").write_text("test: the disk failed\n")
        # ext4 may turn read-only from its error work queue, a moment after the error.
        wait_for(lambda: self.read_only, timeout_s=10, what="the ext4 error turning the filesystem read-only")

    def heal(self) -> None:
        _run("umount", "-l", str(self.mount_point))  # open files keep the broken one until closed
        self._mount()
        assert not self.read_only


@contextlib.contextmanager
def failing_disk(directory: Path, size_mib: int = 64) -> Iterator[FailingDisk]:
    with small_filesystem(directory / "backing", f"{size_mib + 8}m") as backing:
        image = backing / "disk.img"
        with open(image, "wb") as file:
            file.truncate(size_mib << 20)
        _run("mkfs.ext4", "-q", "-F", "-O", "^has_journal", str(image))
        mount_point = directory / "disk"
        mount_point.mkdir(parents=True, exist_ok=True)
        disk = FailingDisk(image, mount_point)
        disk._mount()
        try:
            yield disk
        finally:
            subprocess.run(["umount", "-l", str(mount_point)], check=False)
            for device in disk.devices:  # a busy one is freed when its last file closes
                subprocess.run(["losetup", "-d", device], check=False)
