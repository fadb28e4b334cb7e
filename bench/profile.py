"""Where Ebb's CPU goes under load: `python -m bench.profile {produce,consume,latency,java-produce,java-consume,
rdkafka-produce,rdkafka-consume} [--partitions N] [--out FILE]`.

Starts one Ebb broker (data on disk), points py-spy (`pip install -e '.[bench]'`) at the broker
process while confluent-kafka drives the load of bench/produce.py (1 KiB records, 1 partition,
acks=1), bench/consume.py (the same records read back) or bench/latency.py (2,000 records/s, one at a
time, long-polling consumer) — or Kafka's Java perf tools as bench/perf_tools.py runs them
(java-produce, java-consume), or bench/goals.py's C load on librdkafka (rdkafka-produce, acks=1;
rdkafka-consume, the records read back --passes times) — and prints the functions with the most
samples: by their own time (self) and with what they call (inclusive). py-spy samples the
interpreter's stacks; time spent in C (uvloop's socket calls, os.write's copy into the page cache)
is charged to the Python line that made the call, and uvloop's own work to `Runner.run`. `--out`
keeps the raw samples (py-spy's collapsed stack format, one stack per line, which flamegraph tools
read).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.peers import Ebb, create_topic, warm_up

KiB = 1024


def py_spy() -> str:
    path = Path(sys.executable).parent / "py-spy"
    found = str(path) if path.exists() else shutil.which("py-spy")
    if not found:
        sys.exit("py-spy is not installed: `make bench` installs the bench extra (pip install -e '.[bench]')")
    return found


def summarize(raw: Path, top: int) -> None:
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    print(f"\n{total} samples")
    print("\nself (the line itself, with the C it calls)")
    for frame, n in own.most_common(top):
        print(f"  {100 * n / total:5.1f}%  {frame}")
    print("\ninclusive (with everything it calls), below the event loop")
    shown = 0
    for frame, n in inclusive.most_common():
        if frame.startswith(("<module>", "_run_", "main (", "cmd_broker", "run (uvloop", "Runner.run")):
            continue
        print(f"  {100 * n / total:5.1f}%  {frame}")
        shown += 1
        if shown == top:
            break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("load", choices=["produce", "consume", "latency", "java-produce", "java-consume",
                                         "rdkafka-produce", "rdkafka-consume"])
    parser.add_argument("--partitions", type=int, default=1, help="of the topic (default 1)")
    parser.add_argument("--records", type=int, default=600_000, help="1 KiB records for produce/consume")
    parser.add_argument("--passes", type=int, default=3, help="reads of the records for rdkafka-consume")
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second (default 500)")
    parser.add_argument("--top", type=int, default=20, help="rows per list")
    parser.add_argument("--out", default=None, help="keep the raw samples in this file")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-profile-"))
    raw = Path(args.out) if args.out else root / "samples.txt"
    try:
        with Ebb(root) as ebb:
            create_topic(ebb.bootstrap, "profile", args.partitions)
            if args.load not in ("produce", "java-produce"):
                warm_up(ebb.bootstrap)
            if args.load in ("consume", "java-consume"):
                from bench.produce import produce_load

                produce_load(ebb.bootstrap, "profile", args.partitions, args.records, KiB)
            if args.load == "rdkafka-consume":
                from bench.goals import rdkafka_produce

                rdkafka_produce(ebb.bootstrap, "profile", args.partitions, args.records, "1")
            spy = subprocess.Popen([py_spy(), "record", "--pid", str(ebb.pid), "--rate", str(args.rate),
                                    "--format", "raw", "--output", str(raw), "--nonblocking"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # py-spy attaches
            before = ebb.cpu_seconds()
            if args.load == "produce":
                from bench.produce import produce_load

                seconds = produce_load(ebb.bootstrap, "profile", args.partitions, args.records, KiB)
                figure = f"{args.records * KiB / seconds / 1e6:.0f} MB/s"
                data = args.records * KiB
            elif args.load.startswith("rdkafka-"):
                from bench.goals import rdkafka_consume, rdkafka_produce

                if args.load == "rdkafka-produce":
                    rates = [rdkafka_produce(ebb.bootstrap, "profile", args.partitions, args.records, "1")]
                else:
                    rates = [rdkafka_consume(ebb.bootstrap, "profile", args.partitions, args.records)
                             for _ in range(args.passes)]
                figure = " ".join(f"{r:.0f}" for r in rates) + " MB/s"
                data = args.records * KiB * len(rates)
            elif args.load.startswith("java-"):
                from bench.perf_tools import consumer_perf, producer_perf

                if args.load == "java-produce":
                    _, mb_s = producer_perf(ebb.bootstrap, "profile", args.records, KiB)
                else:
                    _, mb_s = consumer_perf(ebb.bootstrap, "profile", args.records)
                figure = f"{mb_s:.0f} MB/s (the tool's own figure)"
                data = args.records * KiB
            elif args.load == "consume":
                from bench.consume import consume_load

                seconds, timed = consume_load(ebb.bootstrap, "profile", args.partitions, args.records)
                figure = f"{timed * KiB / seconds / 1e6:.0f} MB/s"
                data = args.records * KiB
            else:
                from bench.latency import measure
                from bench.peers import percentile

                latencies = measure(ebb.bootstrap, "profile", 2000, 8, {"fetch.wait.max.ms": 500})
                figure = f"p50 {percentile(latencies, 0.5):.2f} ms, p99 {percentile(latencies, 0.99):.2f} ms"
                data = 2000 * 9 * KiB
            cpu = ebb.cpu_seconds() - before
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        print(f"Ebb under {args.load} load: {figure}, broker CPU {cpu:.2f} s ({cpu / (data / 1e9):.2f} CPU-s/GB)"
              " (py-spy's sampling slows the broker down a little)")
        summarize(raw, args.top)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
