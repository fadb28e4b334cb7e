"""Cold-path file work through aiofiles: checkpoints and snapshots written atomically, deleted
segments and partition directories removed.

These run a few times a second at most (a DeleteRecords' checkpoint, a producer snapshot, a metadata
change, a deletion after `file.delete.delay.ms`); aiofiles runs them in the executor it is given (the
log's I/O pool, or the loop's default one), so the event loop never waits on the disk. The hot paths
— appends, reads for Fetch, the flushes a produce waits for — keep their own hop to the pool
(broker/log/log.py, broker/log/slices.py).

An atomic write is one step in the pool (aiofiles' `wrap` of checkpoint.write_atomically: tmp,
fsync, rename, fsync the directory; a stale `.tmp` is removed at start-up), and so is a removal,
not one step per file operation: a DeleteRecords answer waits for its checkpoint, and six hops to the
pool instead of one cost about 0.8 ms of its 1.8 ms p50 on one partition (bench.delete_records,
measured both ways).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from concurrent.futures import Executor
from pathlib import Path

import aiofiles.os

from broker.log import checkpoint

_write_atomically = aiofiles.os.wrap(checkpoint.write_atomically)


async def write_atomically(path: Path, content: bytes, *, executor: Executor | None,
                           sync: bool = True, mode: int | None = None) -> None:
    """Replace `path` with `content`; with `sync`, durable (file and directory entry) on return.
    `mode` sets the permission bits before any byte is written (for secrets)."""
    await _write_atomically(path, content, sync=sync, mode=mode, executor=executor)


def unlink_all(paths: Iterable[Path]) -> None:
    """Blocking: unlink each path; one already gone is not an error (a deletion a stop interrupted)."""
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _remove_tree_if_there(path: Path) -> None:
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass


_unlink_all = aiofiles.os.wrap(unlink_all)
_remove_tree = aiofiles.os.wrap(_remove_tree_if_there)


async def remove_files(paths: Iterable[Path], *, executor: Executor | None) -> None:
    """Unlink each path (one step in the pool for all of them); one already gone is not an error."""
    await _unlink_all(list(paths), executor=executor)


async def remove_tree(path: Path, *, executor: Executor | None) -> None:
    """Remove a directory and everything in it, if it is still there."""
    await _remove_tree(path, executor=executor)
