"""Where Ebb's system time under a consume goes, call by call, beside the kernel's floor (issue 33):
`python -m bench.fetch_syscalls [--records N] [--reads N] [--partitions 1,6] [--think-us-per-mb N]`.

One Ebb broker (this tree) fills a topic per partition count with the C producer (bench/rdkafka_load.c)
and the C consumer reads it back from the page cache, --reads times. Each read runs twice: under
`perf stat` of every syscall tracepoint, which gives the calls per Fetch (the Fetch count from the
broker's /metrics), and under `perf record -g` (4 kHz cpu-clock), whose samples of the event-loop thread
give its CPU-s per 10^9 bytes read: user time, and kernel time by the system call it was under
(sendfile's share in the loopback receive softirq apart: on loopback the client's TCP receive runs in
whichever call meets it). `sendfile_floor` (bench/sendfile_floor.c: a bare sender of the same bytes,
born Reno as Ebb's loopback listeners are, its reader spinning --think-us-per-mb per MB as a parsing
client) is sampled the same way. Counting slows the broker: read the CPU from the sampled runs.

Needs perf and the right to trace (root, or kernel.perf_event_paranoid <= -1); `make bench` builds the
two C tools. docs/performance.md ("Findings behind the design":
system time above the floor) used it.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.floor import FLOOR
from bench.goals import RDKAFKA_LOAD, rdkafka_produce
from bench.peers import Ebb, create_topic, free_port, warm_up

SAMPLE_S = 1 / 4000  # perf record's default frequency
_FETCHES = re.compile(r'kafka_network_requestmetrics_requests_total\{[^}]*request="Fetch"[^}]*\} ([\d.e+]+)')
_READ = re.compile(r"bytes=(\d+) seconds=([\d.]+)")


def fetches(metrics_port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    found = _FETCHES.search(text)
    return float(found.group(1)) if found else 0.0


def read(ebb: Ebb, topic: str, partitions: int, records: int) -> int:
    out = subprocess.run([str(RDKAFKA_LOAD), "consume", ebb.bootstrap, topic, str(partitions), str(records)],
                         capture_output=True, text=True, check=True).stdout
    found = _READ.search(out)
    assert found is not None, out
    return int(found.group(1))


def _attached(command: list[str], pid: int) -> subprocess.Popen:
    tracer = subprocess.Popen([*command, "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached before the first request
    return tracer


def _stop(tracer: subprocess.Popen) -> None:
    tracer.send_signal(signal.SIGINT)
    tracer.wait(60)


def counted_read(ebb: Ebb, metrics_port: int, topic: str, partitions: int, records: int, work: Path
                 ) -> tuple[collections.Counter, float]:
    """({syscall: calls}, Fetch requests) of one read."""
    out = work / "stat.csv"
    before = fetches(metrics_port)
    tracer = _attached(["perf", "stat", "-x", ",", "-o", str(out), "-e", "syscalls:sys_enter_*"], ebb.pid)
    read(ebb, topic, partitions, records)
    _stop(tracer)
    return stat_calls(out.read_text()), fetches(metrics_port) - before


def stat_calls(csv: str) -> collections.Counter:
    """{syscall: calls} from `perf stat -x ,` of the sys_enter tracepoints."""
    calls: collections.Counter = collections.Counter()
    for line in csv.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].isdigit() and fields[2].startswith("syscalls:sys_enter_"):
            calls[fields[2].removeprefix("syscalls:sys_enter_")] += int(fields[0])
    return calls


def split_samples(data: Path) -> dict[str, collections.Counter]:
    text = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid,ip,sym"], capture_output=True, text=True,
                          check=True).stdout
    return split_script(text)


def split_script(text: str) -> dict[str, collections.Counter]:
    """{thread id: samples by where they were} from `perf script -F tid,ip,sym` of call-graph samples:
    "user", "kernel", "sys:<call>" (the function do_syscall_64 called: inlined entries show as e.g.
    ksys_write), "irq" (kernel samples outside a call), "sendfile softirq" (net_rx_action under sendfile)."""
    threads: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        if len(lines) < 2:
            continue
        frames = [line.split(None, 1) for line in lines[1:]]
        symbols = [frame[1].strip() if len(frame) > 1 else "" for frame in frames]
        counts = threads[lines[0].split()[0]]
        if not frames[0][0].startswith("ffffffff"):  # a user-space leaf
            counts["user"] += 1
            continue
        counts["kernel"] += 1
        if "do_syscall_64" not in symbols:
            counts["irq"] += 1
            continue
        at = symbols.index("do_syscall_64") - 1
        if at > 0 and symbols[at] == "x64_sys_call":  # the dispatcher of newer kernels
            at -= 1
        call = symbols[at].removeprefix("__x64_sys_").removeprefix("__do_sys_") if at >= 0 else "?"
        counts[f"sys:{call}"] += 1
        if call == "sendfile64" and "net_rx_action" in symbols:
            counts["sendfile softirq"] += 1
    return threads


def sampled(command: list[str], data: Path, pid: int | None = None) -> dict[str, collections.Counter]:
    if pid is None:
        subprocess.run(["perf", "record", "-q", "-g", "-o", str(data), "--", *command], check=True, capture_output=True)
    else:
        tracer = _attached(["perf", "record", "-q", "-g", "-o", str(data)], pid)
        subprocess.run(command, check=True, capture_output=True)
        _stop(tracer)
    return split_samples(data)


def busiest(threads: dict[str, collections.Counter], key: str) -> collections.Counter:
    return max(threads.values(), key=lambda counts: counts[key])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="1 KiB records per topic")
    parser.add_argument("--reads", type=int, default=3, help="counted and sampled reads per topic")
    parser.add_argument("--partitions", default="1,6", help="comma-separated partition counts")
    parser.add_argument("--think-us-per-mb", type=int, default=250, help="the floor's reader's spin per MB")
    args = parser.parse_args()
    if shutil.which("perf") is None:
        sys.exit("needs perf (Debian: linux-perf)")
    for tool in (RDKAFKA_LOAD, FLOOR):
        if not os.access(tool, os.X_OK):
            sys.exit(f"no {tool}: `make bench` builds it")
    counts = [int(n) for n in args.partitions.split(",")]
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-fetch-syscalls-"))
    metrics_port = free_port()
    ebb = Ebb(root, {"ebb.metrics.listener": f"http://127.0.0.1:{metrics_port}"})
    print(f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; {args.records} records of 1 KiB per topic")
    try:
        ebb.start()
        warm_up(ebb.bootstrap)
        for n in counts:
            create_topic(ebb.bootstrap, f"syscalls-{n}", n)
            rdkafka_produce(ebb.bootstrap, f"syscalls-{n}", n, args.records, "1")
            read(ebb, f"syscalls-{n}", n, args.records)  # the page cache warm
        for n in counts:
            topic, calls, requests = f"syscalls-{n}", collections.Counter(), 0.0
            ebb_samples, floor_samples = collections.Counter(), collections.Counter()
            for _ in range(args.reads):
                got, answered = counted_read(ebb, metrics_port, topic, n, args.records, root)
                calls += got
                requests += answered
                threads = sampled([str(RDKAFKA_LOAD), "consume", ebb.bootstrap, topic, str(n), str(args.records)],
                                  root / "ebb.data", ebb.pid)
                ebb_samples += busiest(threads, "kernel")
                floor_samples += busiest(sampled([str(FLOOR), "--bytes", str(args.records * 1024), "--partitions",
                                                  str(n), "--reps", "1", "--dir", str(root), "--cc", "reno",
                                                  "--cc-on-listener", "--think-us-per-mb",
                                                  str(args.think_us_per_mb)], root / "floor.data"),
                                         "sys:sendfile64")
            report(n, calls, requests, ebb_samples, floor_samples, args.reads * args.records * 1024)
    finally:
        ebb.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def report(partitions: int, calls: collections.Counter, requests: float, ebb: collections.Counter,
           floor: collections.Counter, size: int) -> None:
    """Both read `size` bytes of values (the floor sends as many from its files)."""
    print(f"\n{partitions} partition(s): {requests:.0f} Fetch requests counted; calls per Fetch:")
    print("  " + ", ".join(f"{name} {count / requests:.2f}" for name, count in calls.most_common()
                           if count / requests >= 0.01))

    def per_gb(counts: collections.Counter, key: str) -> str:
        return f"{counts[key] * SAMPLE_S / size * 1e9:>9.4f}"

    def floor_per_gb(key: str) -> str:  # its other calls are the writing of its files before it serves
        return per_gb(floor, key) if key in (*serving, "user", "kernel", "sendfile softirq") else f"{'—':>9}"

    # The floor's main thread also writes its files before serving: only its serving calls are its floor
    serving = ("sys:sendfile64", "sys:sendto", "sys:poll", "sys:recvfrom")
    floor["kernel"] = sum(floor[key] for key in serving)
    rows = ["user", "kernel", "sys:sendfile64", "sendfile softirq"]
    rows += sorted({key for key in ebb if key.startswith("sys:") and key not in rows} | set(serving[1:]),
                   key=lambda key: -ebb[key] - floor[key])
    print(f"  event-loop thread, CPU-s per 10^9 bytes (4 kHz samples)  {'Ebb':>9} {'floor':>9}")
    for key in rows:
        if ebb[key] or (key in serving and floor[key]):
            print(f"  {key:<55}{per_gb(ebb, key)} {floor_per_gb(key)}")
    print(f"  {'irq (kernel samples outside a call)':<55}{per_gb(ebb, 'irq')}")


if __name__ == "__main__":
    main()
