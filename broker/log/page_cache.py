"""Whether a file range is in the page cache, asked of the kernel without reading it: cachestat(2)
(Linux 6.5+). A Fetch answer is sent straight from the page cache (sendfile) only when its bytes are
there, because sendfile on pages that are not would wait for the disk on the event loop.

Where the call is missing (an older kernel, another system, seccomp) `cached` always says False and
the callers read the bytes as before (broker/log/slices.py). The call goes through broker/_file_send.c
where that is built (once per partition of every Fetch: ctypes' own cost per call was most of it), and
through ctypes where not.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import platform
from collections.abc import Callable

_PAGE = mmap.PAGESIZE
# cachestat is 451 in the generic syscall table, which x86-64 and arm64 share for new calls.
_CACHESTAT = 451 if platform.system() == "Linux" and platform.machine() in ("x86_64", "aarch64") else None


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted", "nr_recently_evicted")]


class _CacheStat:
    """One reusable pair of argument structs: the event loop is the only caller."""

    def __init__(self, number: int) -> None:
        self._syscall = ctypes.CDLL(None, use_errno=True).syscall
        self._number = number
        self._range = _Range()
        self._stat = _Stat()
        self._range_ref = ctypes.byref(self._range)
        self._stat_ref = ctypes.byref(self._stat)
        self.working = True

    def cached(self, fd: int, position: int, length: int) -> bool:
        if length <= 0:
            return True
        first = position // _PAGE
        pages = (position + length + _PAGE - 1) // _PAGE - first
        self._range.off = first * _PAGE
        self._range.len = pages * _PAGE
        if self._syscall(self._number, fd, self._range_ref, self._stat_ref, 0) != 0:
            if ctypes.get_errno() in (errno.ENOSYS, errno.EPERM):  # not this kernel, or filtered
                self.working = False
            return False
        return self._stat.nr_cache >= pages


class _CompiledCacheStat:
    """The same check without ctypes' per-call cost: `cached` is broker/_file_send.c's function itself
    (None where the kernel has no cachestat or refuses it, which the probe here finds first)."""

    def __init__(self, cached: Callable[[int, int, int], bool | None]) -> None:
        self.cached = cached
        self.working = cached(-1, 0, 1) is not None  # a bad descriptor: False where the call exists


try:  # built by `pip install -e .` (setup.py); ctypes where it is not
    from broker._file_send import cached as _compiled_cached
except ImportError:
    _compiled_cached = None

_KERNEL: _CacheStat | _CompiledCacheStat | None = None
if _CACHESTAT is not None:
    _KERNEL = _CompiledCacheStat(_compiled_cached) if _compiled_cached is not None else _CacheStat(_CACHESTAT)


def available() -> bool:
    """Whether this kernel answers cachestat (False until asked once where the call is missing)."""
    return _KERNEL is not None and _KERNEL.working


def checker() -> Callable[[int, int, int], bool | None] | None:
    """`cached` itself when the kernel answers cachestat, else None (then nothing is known to be
    cached): a caller checking many ranges at once skips the per-range tests of the module function."""
    return _KERNEL.cached if _KERNEL is not None and _KERNEL.working else None


def cached(fd: int, position: int, length: int) -> bool:
    """Every page of bytes [position, position + length) of the open file `fd` is in the page cache."""
    return _KERNEL is not None and _KERNEL.working and bool(_KERNEL.cached(fd, position, length))
