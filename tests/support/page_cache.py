"""Taking a file's pages out of the page cache, so that the next read goes to the disk."""

from __future__ import annotations

import os
from pathlib import Path


def drop_from_page_cache(path: Path) -> None:
    """Write the file's dirty pages back, then drop them all (dirty pages cannot be dropped)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
