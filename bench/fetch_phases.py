"""Where a Fetch's time goes in Ebb: `python -m bench.fetch_phases [--records N] [--passes N] [--partitions N]`.

Starts one Ebb broker whose Fetch path is timed phase by phase (this module run as the broker with
`--serve`: it wraps the functions below with a monotonic clock before the broker starts), fills a
topic with bench/goals.py's C producer (1 KiB records) and reads it back --passes times with its C
consumer, then prints the mean wall time per Fetch of each phase and the broker's CPU per Fetch:

    decode      the request frame to a FetchRequest (protocol/framing.py)
    resolve     topics and partitions looked up, authorized, leader and epoch checked (fetch_resolve.py)
    log read    the log's file ranges for each partition: index lookup and header walks (_plan)
      log.read  of which PartitionLog.read; of that, seg.find: LogSegment.translate_offset (the batch
      seg.find  holding the offset), seg.read: LogSegment.read (that and the walk to the last batch
      seg.read  that fits)
    regions     the page-cache check and FileRegions, or the copy into a buffer (slices_to_send)
    encode      the answer's headers around the record data (fastpath.encode_fetch_response)
    handler     the whole handler (resolve, log read, regions and the rest of it)
    send set-up the first send + sendfile calls, up to the socket's first "full" (FileSender.send)
    send        every call into FileSender._pump (the sendfile copies into the socket), first included
    request     one request from its frame to its answer handed to the socket (Connection._serve)

Phases nest (handler holds resolve, log read and regions; send holds send set-up), so they do not add
up; the clock's own cost (~0.2 µs a wrap) is in every figure.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.peers import CLOCK_TICKS

_totals: collections.Counter[str] = collections.Counter()
_counts: collections.Counter[str] = collections.Counter()
PHASES = ("decode", "resolve", "log read", "log.read", "seg.find", "seg.read", "regions", "encode", "handler",
          "send set-up", "send", "request")


def _timed(name: str, fn):
    clock = time.perf_counter_ns

    def wrapper(*args, **kwargs):
        start = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            _totals[name] += clock() - start
            _counts[name] += 1
    return wrapper


def _timed_async(name: str, fn):
    clock = time.perf_counter_ns

    async def wrapper(*args, **kwargs):  # wall time includes any wait (a parked fetch: none here)
        start = clock()
        try:
            return await fn(*args, **kwargs)
        finally:
            _totals[name] += clock() - start
            _counts[name] += 1
    return wrapper


def _instrument() -> None:
    import dataclasses

    from broker import file_sender, server
    from broker.handlers import REGISTRY, k01_fetch
    from broker.log.log import PartitionLog
    from broker.log.segment import LogSegment
    from broker.replica.manager import ReplicaManager
    from protocol.enums import ApiKey

    handler = REGISTRY[ApiKey.FETCH]
    REGISTRY[ApiKey.FETCH] = dataclasses.replace(handler, decode=_timed("decode", handler.decode),
                                                 encode=_timed("encode", handler.encode),
                                                 fn=_timed_async("handler", handler.fn))
    k01_fetch.resolve = _timed("resolve", k01_fetch.resolve)
    k01_fetch.resolve_consumer = _timed("resolve", k01_fetch.resolve_consumer)
    k01_fetch._plan = _timed("log read", k01_fetch._plan)
    PartitionLog.read = _timed("log.read", PartitionLog.read)
    LogSegment.translate_offset = _timed("seg.find", LogSegment.translate_offset)
    LogSegment.read = _timed("seg.read", LogSegment.read)
    ReplicaManager.slices_to_send = _timed_async("regions", ReplicaManager.slices_to_send)
    file_sender.FileSender.send = _timed("send set-up", file_sender.FileSender.send)
    file_sender.FileSender._pump = _timed("send", file_sender.FileSender._pump)
    server.Connection._serve = _timed_async("request", server.Connection._serve)


def _dump(path: str) -> None:
    with open(path, "w") as out:
        json.dump({"totals": _totals, "counts": _counts}, out)


def _user_system(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def serve(out: str, argv: list[str]) -> None:
    import runpy

    _instrument()
    signal.signal(signal.SIGUSR1, lambda *_: (_totals.clear(), _counts.clear()))  # start counting now
    signal.signal(signal.SIGUSR2, lambda *_: _dump(out))
    sys.argv = ["broker", *argv]
    runpy.run_module("broker", run_name="__main__", alter_sys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000, help="1 KiB records in the topic")
    parser.add_argument("--passes", type=int, default=4, help="reads of the whole topic")
    parser.add_argument("--partitions", type=int, default=1)
    args = parser.parse_args()

    from bench.goals import rdkafka_consume, rdkafka_produce
    from bench.peers import Ebb, create_topic, warm_up

    root = Path(tempfile.mkdtemp(prefix="ebb-bench-fetch-phases-"))
    out = root / "phases.json"

    class TimedEbb(Ebb):
        def command(self) -> list[str]:
            return [sys.executable, "-m", "bench.fetch_phases", "--serve", str(out), *super().command()[3:]]

    try:
        with TimedEbb(root) as ebb:
            create_topic(ebb.bootstrap, "phases", args.partitions)
            warm_up(ebb.bootstrap)
            rdkafka_produce(ebb.bootstrap, "phases", args.partitions, args.records, "1")
            rdkafka_consume(ebb.bootstrap, "phases", args.partitions, args.records)  # warm: pages, caches
            os.kill(ebb.pid, signal.SIGUSR1)
            time.sleep(0.2)
            cpu, split = ebb.cpu_seconds(), _user_system(ebb.pid)
            rates = [rdkafka_consume(ebb.bootstrap, "phases", args.partitions, args.records)
                     for _ in range(args.passes)]
            cpu = ebb.cpu_seconds() - cpu
            user, system = (after - before for after, before in zip(_user_system(ebb.pid), split, strict=True))
            os.kill(ebb.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 10
            while not out.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)
            got = json.loads(out.read_text())
        fetches = got["counts"].get("handler", 0)
        print(f"Ebb, {args.partitions} partition(s), {args.records:,} records of 1 KiB read {args.passes} times by "
              f"librdkafka: {' '.join(f'{r:.0f}' for r in rates)} MB/s")
        print(f"{fetches:,} fetches, {args.records * 1024 * args.passes / max(fetches, 1) / 1024:.0f} KiB each; "
              f"broker CPU {cpu * 1e6 / max(fetches, 1):.0f} µs per fetch ({cpu:.2f} s: user "
              f"{user * 1e6 / max(fetches, 1):.0f} µs, system {system * 1e6 / max(fetches, 1):.0f} µs)")
        print(f"  {'phase':<12} {'calls':>8} {'µs per fetch':>13} {'µs per call':>12}")
        for name in PHASES:
            total, calls = got["totals"].get(name, 0), got["counts"].get(name, 0)
            if calls:
                print(f"  {name:<12} {calls:>8,} {total / 1e3 / max(fetches, 1):>13.1f} {total / 1e3 / calls:>12.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3:])
    else:
        main()
