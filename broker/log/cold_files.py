"""Cold-path file work through aiofiles: checkpoints and snapshots written atomically, deleted
segments and partition directories removed.

These run a few times a second at most (a DeleteRecords' checkpoint, a producer snapshot, a metadata
change, a deletion after `file.delete.delay.ms`), so they read as ordinary async file code: aiofiles
runs each step in the executor it is given (the log's I/O pool, or the loop's default one), and the
event loop never waits on the disk. The hot paths — appends, reads for Fetch, the flushes a produce
waits for — keep their single hop to the pool instead (broker/log/log.py, broker/log/slices.py).

A write goes to `<name>.tmp`, is made durable, replaces the file and then the directory entry is made
durable: a crash leaves the old content or the new one, and a stale `.tmp` is removed at start-up
(broker/log/loader.py).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from concurrent.futures import Executor
from pathlib import Path

import aiofiles
import aiofiles.os

from broker.log.checkpoint import fsync_dir
from broker.log.common import TMP_SUFFIX

_fsync = aiofiles.os.wrap(os.fsync)
_fchmod = aiofiles.os.wrap(os.fchmod)
_fsync_dir = aiofiles.os.wrap(fsync_dir)
_remove_tree = aiofiles.os.wrap(shutil.rmtree)


async def write_atomically(path: Path, content: bytes, *, executor: Executor | None,
                           sync: bool = True, mode: int | None = None) -> None:
    """Replace `path` with `content`; with `sync`, durable (file and directory entry) on return.
    `mode` sets the permission bits before any byte is written (for secrets)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    async with aiofiles.open(tmp, "wb", executor=executor) as file:
        if mode is not None:
            await _fchmod(file.fileno(), mode, executor=executor)
        await file.write(content)
        if sync:
            await file.flush()
            await _fsync(file.fileno(), executor=executor)
    await aiofiles.os.replace(tmp, path, executor=executor)
    if sync:
        await _fsync_dir(path.parent, executor=executor)


async def remove_files(paths: Iterable[Path], *, executor: Executor | None) -> None:
    """Unlink each path; one already gone is not an error (a deletion a stop interrupted)."""
    for path in paths:
        try:
            await aiofiles.os.remove(path, executor=executor)
        except FileNotFoundError:
            pass


async def remove_tree(path: Path, *, executor: Executor | None) -> None:
    """Remove a directory and everything in it, if it is still there."""
    if await aiofiles.os.path.isdir(path, executor=executor):
        await _remove_tree(path, executor=executor)
