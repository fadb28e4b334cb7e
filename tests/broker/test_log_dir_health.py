"""A log dir that failed is taken offline whole and brought back by its probe, without a restart
(broker/log/dir_health.py); a partition that could not load for want of space is loaded once the
disk has room (issue 29)."""

from __future__ import annotations

import asyncio
import errno
import os
from dataclasses import replace
from pathlib import Path

import pytest

from broker.log import StorageError, TopicPartition
from broker.log import checkpoint as ck
from broker.log.dir_health import PROBE_FILE, probe_dir
from tests.broker.test_log_support import QUIET, batch, open_manager
from tests.support.small_disk import small_filesystem

T0 = TopicPartition("events", 0)
T1 = TopicPartition("events", 1)
FAST_PROBE = replace(QUIET, failure_probe_interval_ms=20)


def reloaded_events(manager) -> asyncio.Queue[TopicPartition]:
    queue: asyncio.Queue[TopicPartition] = asyncio.Queue()
    manager.reload_listeners.append(queue.put_nowait)
    return queue


def _served(manager, tp: TopicPartition) -> bool:
    try:
        return manager.get_log(tp) is not None
    except StorageError:
        return False


async def test_an_io_error_takes_the_whole_dir_offline_until_the_probe_passes(tmp_path: Path) -> None:
    manager = await open_manager(tmp_path, manager_config=FAST_PROBE)
    broken = await manager.get_or_create_log(T0)
    healthy = await manager.get_or_create_log(T1)
    for log in (broken, healthy):
        await log.append(batch(3))
    # The probe cannot write while its file's name is taken by a directory (EISDIR): the dir stays down.
    (tmp_path / PROBE_FILE).mkdir()
    # Swap a read-only descriptor in under the segment's: the next write fails with EBADF.
    read_only = os.open(os.devnull, os.O_RDONLY)
    os.dup2(read_only, broken.segments[-1].file.fd)
    os.close(read_only)
    with pytest.raises(StorageError) as info:
        await broken.append(batch(1))
    assert info.value.error_code == 56  # KAFKA_STORAGE_ERROR
    # As in Kafka, one I/O error takes every partition of the dir offline, not only the one that hit it.
    for tp in (T0, T1):
        with pytest.raises(StorageError, match="log dir .* failed"):
            manager.get_log(tp)
    with pytest.raises(StorageError):
        await healthy.append(batch(1))
    assert manager.health.failed and manager.health.failures == 1
    assert set(manager.offline_partitions) == {T0, T1}
    failing = manager.health._task
    assert failing is not None and not failing.done()

    reloaded = reloaded_events(manager)
    served: list[bool] = []  # whether a told partition's log is served when it is told (its replica takes
    manager.reload_listeners.append(lambda tp: served.append(_served(manager, tp)))  # its role then)
    (tmp_path / PROBE_FILE).rmdir()  # healthy again
    assert {await reloaded.get(), await reloaded.get()} == {T0, T1}
    assert served == [True, True]
    await failing
    assert not manager.health.failed and manager.health.recoveries == 1
    assert not manager.offline_partitions
    for tp in (T0, T1):
        log = manager.get_log(tp)
        assert log is not None and log is not broken and log is not healthy
        assert (await log.append(batch(1))).first_offset == 3  # what was written before is all there
    assert not (tmp_path / PROBE_FILE).exists()
    await manager.shutdown()
    assert ck.read_clean_shutdown(tmp_path)  # everything online again: the next start trusts the dir


async def test_a_partition_that_could_not_load_for_want_of_space_loads_when_there_is_room(tmp_path: Path) -> None:
    # A tmpfs with few inodes: a partition directory without a segment needs a new file to load.
    with small_filesystem(tmp_path / "disk", "4m", inodes=64) as disk:
        logs = disk / "logs"
        no_headroom = replace(FAST_PROBE, min_free_bytes=0)  # a tmpfs this small is all below the default
        manager = await open_manager(logs, manager_config=no_headroom)
        await manager.get_or_create_log(T1)
        await manager.shutdown()
        (logs / T0.dir_name).mkdir()  # a partition left without segment files
        fillers = []
        try:
            while True:
                fillers.append(os.open(disk / f"filler-{len(fillers)}", os.O_WRONLY | os.O_CREAT, 0o644))
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        for fd in fillers:
            os.close(fd)
        manager = await open_manager(logs, manager_config=no_headroom)
        with pytest.raises(StorageError, match="load failed"):
            manager.get_log(T0)
        assert manager.get_log(T1) is not None
        reloaded = reloaded_events(manager)
        for index in range(len(fillers)):  # room again: a file removed by hand
            (disk / f"filler-{index}").unlink()
        assert await reloaded.get() == T0
        log = manager.get_log(T0)
        assert log is not None and (await log.append(batch(2))).first_offset == 0
        assert not manager.offline_partitions and manager.health.recoveries == 0  # the dir never failed
        await manager.shutdown()


def test_the_probe_writes_syncs_reads_and_removes_its_file(tmp_path: Path) -> None:
    probe_dir(tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError):
        probe_dir(tmp_path / "missing")
