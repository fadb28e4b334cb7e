"""What a consume of segments evicted from the page cache costs Ebb (issue 33):
`python -m bench.evicted_fetch [--mb N] [--reps N] [--methods-only]`.

Two parts. First, the ways a pool thread can bring a file's evicted pages back into the page cache,
timed on one file of 256 MiB evicted before each (fsync, then POSIX_FADV_DONTNEED): the CPU time of
the thread that does it (time.thread_time; the disk's wait is not CPU) per 10^9 bytes, and its wall
time. Then one Ebb broker (this tree, bench/peers.py) gets a one-partition topic of --mb MiB of 1 KiB
records (bench/rdkafka_load.c, `make bench` builds it), and each repetition reads it all back three
times, one Fetch of 1 MiB after the other on one connection (a consumer's default size), the range
each Fetch reads taken out of the page cache just before it: every page of it, one page in 16 (what
the VM's proactive reclaimer leaves of a segment just written: 2-64 pages of a MiB missing), or none.
A whole segment evicted before a consumer reads it is not this case: the kernel's readahead (8 MiB on
this VM's disk) brings each next range back before its Fetch comes. Per read: the broker's CPU-s (user
+ system, every thread) per 10^9 record bytes and its user and system parts, MB/s, and the share of
the record bytes the broker sent from its files (`ebb_fetch_bytes_sent_from_files_total`; the rest
was copied).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import mmap
import os
import shutil
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import structlog

from bench.goals import RDKAFKA_LOAD, KiB, rdkafka_produce
from bench.peers import Ebb, create_topic, free_port
from tests.support.page_cache import drop_from_page_cache

METHOD_FILE_BYTES = 256 << 20
_MADV_POPULATE_READ = 22  # Linux 5.14+; Python 3.11's mmap module has no name for it
_STEP = 16 << 20
PAGE = mmap.PAGESIZE
FETCH_BYTES = 1 << 20  # a consumer's max.partition.fetch.bytes by default
IDLE_S = 5.0


def _preadv_reused_buffer(fd: int, size: int) -> None:
    view = memoryview(bytearray(256 * KiB))
    position = 0
    while position < size:
        position += os.preadv(fd, [view], position)


def _preadv_fresh_buffer(fd: int, size: int) -> None:
    """What the copy path does: a new buffer of the whole range, read into."""
    os.preadv(fd, [memoryview(bytearray(size))], 0)


def _sendfile_to_dev_null(fd: int, size: int) -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        position = 0
        while position < size:
            position += os.sendfile(null, fd, position, size - position)
    finally:
        os.close(null)


def _mmap_populate_read(fd: int, size: int) -> None:
    for position in range(0, size, _STEP):
        with mmap.mmap(fd, min(_STEP, size - position), prot=mmap.PROT_READ, offset=position) as mapped:
            mapped.madvise(_MADV_POPULATE_READ)


METHODS: dict[str, Callable[[int, int], None]] = {
    "copy into a fresh buffer": _preadv_fresh_buffer,
    "preadv, reused 256 KiB buffer": _preadv_reused_buffer,
    "mmap + MADV_POPULATE_READ": _mmap_populate_read,
    "sendfile to /dev/null": _sendfile_to_dev_null,
}


def methods(root: Path, reps: int) -> None:
    path = root / "evicted.bin"
    with open(path, "wb") as f:
        for _ in range(METHOD_FILE_BYTES >> 20):
            f.write(os.urandom(1 << 20))
    gb = METHOD_FILE_BYTES / 1e9
    print(f"bringing {METHOD_FILE_BYTES >> 20} MiB evicted back into the page cache, medians of {reps}:")
    fd = os.open(path, os.O_RDONLY)
    try:
        for name, method in METHODS.items():
            cpu, wall = [], []
            for _ in range(reps):
                drop_from_page_cache(path)
                started_cpu, started = time.thread_time(), time.monotonic()
                method(fd, METHOD_FILE_BYTES)
                cpu.append((time.thread_time() - started_cpu) / gb)
                wall.append((time.monotonic() - started) / gb)
            print(f"  {name:<32} thread CPU-s/GB {statistics.median(cpu):6.3f}   wall s/GB "
                  f"{statistics.median(wall):5.2f}", flush=True)
    finally:
        os.close(fd)
        path.unlink()


def _bytes_out(metrics_port: int, topic: str) -> tuple[float, float]:
    """(record bytes sent to consumers of `topic`, record bytes sent from files by the whole broker)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    out = files = 0.0
    for line in text.splitlines():
        if line.startswith("kafka_server_brokertopicmetrics_bytesout_total") and f'topic="{topic}"' in line:
            out = float(line.split()[-1])
        elif line.startswith("ebb_fetch_bytes_sent_from_files_total"):
            files = float(line.split()[-1])
    return out, files


def _evict_range(fd: int, position: int, length: int, every: int) -> None:
    """Every page of the range (`every` 1), or one page in `every`: what a reclaimer leaves of a segment."""
    if every == 1:
        os.posix_fadvise(fd, position, length, os.POSIX_FADV_DONTNEED)
        return
    first = position // PAGE
    for page in range(first, (position + length + PAGE - 1) // PAGE, every):
        os.posix_fadvise(fd, page * PAGE, PAGE, os.POSIX_FADV_DONTNEED)


async def _read_all(port: int, topic: str, segment: Path, every: int | None) -> tuple[int, int]:
    """Fetch the partition from offset 0 to its end, FETCH_BYTES at a time, the range the next Fetch
    reads taken out of the page cache first (`every`: see _evict_range; None keeps it): (record bytes,
    Fetches)."""
    from client.connection import BrokerConnection
    from protocol.messages import FetchRequest
    from protocol.records import iter_batches

    fd = os.open(segment, os.O_RDONLY)
    os.fsync(fd)
    got = fetches = offset = position = 0
    try:
        async with BrokerConnection("127.0.0.1", port) as connection:
            while True:
                if every is not None:
                    _evict_range(fd, position, 2 * FETCH_BYTES, every)
                part = FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=offset,
                                                              partition_max_bytes=FETCH_BYTES)
                answer = await connection.request(FetchRequest(
                    replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=FETCH_BYTES, isolation_level=0,
                    topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part])]), version=12)
                records = answer.responses[0].partitions[0].records or b""
                fetches += 1
                if not records:
                    return got, fetches
                got += len(records)
                position += len(records)
                for batch in iter_batches(records, allow_partial_tail=True):
                    offset = batch.next_offset
    finally:
        os.close(fd)


def consumes(root: Path, mb: int, reps: int) -> None:
    records = mb * 1024
    metrics_port = free_port()
    topic = "evicted-fetch"
    cases = {"every page evicted": 1, "1 page in 16 evicted": 16, "cached": None}
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with Ebb(root, {"ebb.metrics.listener": f"http://127.0.0.1:{metrics_port}"}) as ebb:
        create_topic(ebb.bootstrap, topic, 1)
        rdkafka_produce(ebb.bootstrap, topic, 1, records, "1")
        idle = ebb.cpu_seconds()
        time.sleep(IDLE_S)  # what the broker spends doing nothing asked of it, for comparison
        idle = (ebb.cpu_seconds() - idle) / IDLE_S
        segments = sorted((ebb.data_dir / "logs" / f"{topic}-0").glob("*.log"))
        assert len(segments) == 1, segments  # positions in the file are the bytes read so far
        print(f"\n{mb} MiB of 1 KiB records read from offset 0 in Fetches of {FETCH_BYTES >> 20} MiB, the range of "
              f"each Fetch evicted just before it; medians of {reps}: broker CPU-s per 10^9 record bytes "
              f"(user/system), MB/s, share of record bytes sent from files; idle, the broker "
              f"spends {idle:.3f} CPU-s per s")
        figures: dict[str, list[tuple[float, ...]]] = {case: [] for case in cases}
        for _ in range(reps):
            for case, every in cases.items():
                (user, system), (out, files) = ebb.cpu_split(), _bytes_out(metrics_port, topic)
                started = time.monotonic()
                got, fetches = asyncio.run(_read_all(ebb.port, topic, segments[0], every))
                seconds = time.monotonic() - started
                user_after, system_after = ebb.cpu_split()
                out_after, files_after = _bytes_out(metrics_port, topic)
                gb = got / 1e9
                figures[case].append(((user_after - user) / gb, (system_after - system) / gb, got / seconds / 1e6,
                                      (files_after - files) / max(out_after - out, 1)))
        for case, runs in figures.items():
            user, system, mb_s, share = (statistics.median(run[i] for run in runs) for i in range(4))
            print(f"  {case:<22} CPU-s/GB {user + system:5.2f} ({user:.2f}/{system:.2f})   {mb_s:5.0f} MB/s   "
                  f"from files {share:4.0%}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=512, help="MiB of records in the topic (default 512)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--methods-only", action="store_true", help="only the first part: no broker")
    parser.add_argument("--dir", default=None, help="where the files go (default: system temp dir); not tmpfs")
    args = parser.parse_args()
    if not args.methods_only and not os.access(RDKAFKA_LOAD, os.X_OK):
        raise SystemExit(f"no {RDKAFKA_LOAD}: `make bench` builds it (needs librdkafka-dev)")
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-evicted-", dir=args.dir))
    print(f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f} at the start")
    try:
        methods(root, args.reps)
        if not args.methods_only:
            consumes(root, args.mb, args.reps)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
