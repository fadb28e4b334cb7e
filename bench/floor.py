"""The kernel's floor under a consume beside Ebb's and Kafka's consume CPU (issue 33):
`python -m bench.floor [--quick] [--reps N] [--dir PATH] [--think-us-per-mb N] [--floor-option ...]`.

`bench/sendfile_floor.c` (`make bench` builds it into .venv/bin/sendfile_floor) serves page-cached
files over a loopback TCP connection as a broker's Fetch does (a header with MSG_MORE, then sendfile of
1 MiB per partition per answer) to a reader with one request in flight that recv()s each answer into a
buffer, and prints the sender's user and system CPU-s per 10^9 bytes. This runs it on the bytes the
consume cases of bench.goals serve (RECORDS of 1 KiB over 1 and 6 partitions) with three socket
setups: Reno from the listener on, with an autotuned send buffer (what Ebb's loopback listeners give
their connections), BBR (the machine's default) and BBR with Kafka's 100 KiB SO_SNDBUF
(`socket.send.buffer.bytes`, what Kafka's sockets get), beside bench.goals' produce and consume runs of
Ebb and Kafka 4.3.1 with the C librdkafka consumer, both brokers started once and warmed; every
repetition runs each case on Ebb, Kafka and the floor, the order turned each time. Per case the medians
(min-max) of MB/s and of each one's user, system and total CPU-s/GB, and the floor's share of Kafka's
total: a broker whose CPU per consumed GB is to be at most half of Kafka's cannot get there if the
floor alone is above that half.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.goals import RDKAFKA_LOAD, KiB, Runner, warm
from bench.peers import Ebb, Kafka, drop_page_cache, kafka_version, repetitions, run_arguments, warm_up

FLOOR = Path(sys.executable).parent / "sendfile_floor"
PARTITIONS = (1, 6)
# (name, sendfile_floor's options): Ebb's loopback socket (Reno from its listener, autotuned buffer), the
# machine's default (BBR), and Kafka's (BBR, socket.send.buffer.bytes' 100 KiB default)
FLOORS = (("floor reno", ("--cc", "reno", "--cc-on-listener")), ("floor bbr", ("--cc", "bbr")),
          ("floor kafka", ("--cc", "bbr", "--sndbuf", "102400")))
_REP = re.compile(r"rep=\d+ bytes=(\d+) seconds=([\d.]+) sender_user=([\d.]+) sender_sys=([\d.]+)")


def floor_run(root: Path, partitions: int, total: int, options: tuple[str, ...], think_us: int, extra: list[str],
              reps: int = 3) -> list[tuple[float, float, float]]:
    """[(MB/s, sender user CPU-s/GB, sender system CPU-s/GB)] of `reps` reads of the same files."""
    done = subprocess.run([str(FLOOR), "--bytes", str(total), "--partitions", str(partitions), "--reps", str(reps),
                           "--dir", str(root), *options, "--think-us-per-mb", str(think_us), *extra],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"sendfile_floor failed ({done.returncode}): {done.stderr[-2000:]}")
    return [(int(b) / float(s) / 1e6, float(u), float(y)) for b, s, u, y in _REP.findall(done.stdout)]


def _figures(runs: list[tuple[float, float, float]]) -> str:
    """MB/s, user, system, total: medians (min-max of the total)."""
    totals = [u + s for _, u, s in runs]
    return (f"{statistics.median(r[0] for r in runs):>7.0f} {statistics.median(r[1] for r in runs):>6.3f}"
            f" {statistics.median(r[2] for r in runs):>6.3f} {statistics.median(totals):>6.3f}"
            f" ({min(totals):.3f}-{max(totals):.3f})")


def report(results: dict, reps: int) -> None:
    print(f"\nconsume, medians of {reps} repetitions (floor: of 3 reads each): MB/s; CPU-s per 10^9 bytes "
          "user, system, total (min-max of the total)")
    print(f"  {'case':<14} {'who':<11} {'MB/s':>7} {'user':>6} {'system':>6} {'total':>6}")
    for partitions in PARTITIONS:
        kafka_total = statistics.median(u + s for _, u, s in results[partitions]["kafka"])
        for who, runs in results[partitions].items():
            share = ""
            if who.startswith("floor"):
                total = statistics.median(u + s for _, u, s in runs)
                share = f"   {total / kafka_total:.2f}× Kafka's total"
            print(f"  {f'{partitions} partition(s)':<14} {who:<11} {_figures(runs)}{share}", flush=True)
        print(f"  {'':<14} half of Kafka's total: {kafka_total / 2:.3f} CPU-s/GB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(parser, "300,000 records per run instead of 1,000,000, 2 repetitions")
    parser.add_argument("--think-us-per-mb", type=int, default=0,
                        help="the floor's reader spins this long per MB after each answer, as a client parsing "
                             "it (librdkafka: about 200-250)")
    parser.add_argument("--floor-option", action="append", default=[], metavar="OPTION",
                        help="passed to sendfile_floor (repeatable; e.g. --floor-option=--sndbuf "
                             "--floor-option=1048576)")
    args = parser.parse_args()
    for tool in (RDKAFKA_LOAD, FLOOR):
        if not os.access(tool, os.X_OK):
            sys.exit(f"no {tool}: `make bench` builds it")
    reps = repetitions(args)
    records = 300_000 if args.quick else 1_000_000
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-floor-", dir=args.dir))
    print(f"Ebb, {kafka_version()} and sendfile_floor on disk ({root}), {os.cpu_count()} cpus, load average "
          f"{os.getloadavg()[0]:.1f} at the start; {records} records of 1 KiB per run")
    print("the page cache is dropped before each produce" if drop_page_cache() else
          "the page cache is NOT dropped before each produce (needs root)")
    runner = Runner({"rdkafka": records})
    results: dict = {p: {"ebb": [], "kafka": [], **{name: [] for name, _ in FLOORS}} for p in PARTITIONS}
    started = time.monotonic()
    try:
        with Ebb(root, {}) as ebb, Kafka(root) as kafka:
            for broker in (ebb, kafka):
                warm_up(broker.bootstrap)
            warm(runner, [ebb, kafka], "rdkafka")
            for rep in range(reps):
                for partitions in PARTITIONS:
                    order = [ebb, kafka, *FLOORS]
                    for who in (order if rep % 2 == 0 else order[::-1]):
                        if isinstance(who, tuple):
                            results[partitions][who[0]] += floor_run(root, partitions, records * KiB, who[1],
                                                                     args.think_us_per_mb, args.floor_option)
                        else:
                            got = runner.one(who, "rdkafka", partitions, "1")["consume"]
                            results[partitions][who.name].append((got[0], got[3], got[4]))
                print(f"  repetition {rep + 1} done, load average {os.getloadavg()[0]:.1f}", flush=True)
            report(results, reps)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
