"""Keep freed memory in the process instead of handing it back to the kernel after every request.

A Produce request is received into a buffer of its own (about 1 MiB from librdkafka) and a large
Fetch is read into one; glibc serves such blocks with mmap, or from the heap top that it trims back
once more than twice that is free, so nearly every request touched fresh pages: a page fault and
the kernel zeroing each 4 KiB page, which cost more CPU than the data copies themselves (see
docs/performance.md). With fixed thresholds (blocks up to 32 MiB from the heap, trim only past
128 MiB free) the same warm pages are reused. An operator's own MALLOC_MMAP_THRESHOLD_ or
MALLOC_TRIM_THRESHOLD_ environment settings win; other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's upper limit for it on 64-bit
TRIM_THRESHOLD = 128 * 1024 * 1024
_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def keep_freed_memory(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Set glibc's thresholds; True when they were set."""
    if any(name in os.environ for name in _ENV):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))
