"""Where bench.pipeline's CPU goes: `python -m bench.pipeline_cpu [--records N] [--reps N]`.

The same loads as bench.pipeline (format("ebb") writes from spark.range and reads into a noop sink,
beside confluent-kafka's producer and consumer in this process), each timed with the CPU-seconds
(user + system, /proc/<pid>/stat) of every process it runs in: this driver process (the librdkafka
loop and its threads), the Spark JVM, Spark's Python workers (every descendant of the JVM: they are
long-lived, forked by pyspark.daemon, so their counters hold) and the broker. Printed per repetition,
scaled to CPU-seconds per million records: the machine has two cores, so a load whose processes
need more than two CPU-seconds per second cannot go faster there, and on a shared machine the total
is what the others leave.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.peers import CLOCK_TICKS, Ebb, create_topic
from bench.pipeline import (
    PARTITIONS,
    librdkafka_consume,
    librdkafka_produce,
    rows_to_write,
    spark_read,
    spark_write,
    warm_up,
)


def _cpu(pid: int) -> tuple[float, float]:
    """User + system CPU of the process, and of its children that ended and were waited for (so that a
    Python worker exiting between two snapshots still counts, in its parent's figures)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile
        return 0.0, 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS, (int(fields[13]) + int(fields[14])) / CLOCK_TICKS


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            out.setdefault(parent, []).append(int(name))
    return out


def snapshot(broker_pid: int) -> dict[str, float]:
    me, children = os.getpid(), _children()
    out = {"driver": _cpu(me)[0], "jvm": 0.0, "workers": 0.0, "broker": sum(_cpu(broker_pid))}
    for child in children.get(me, []):
        with open(f"/proc/{child}/cmdline", "rb") as f:
            if b"java" not in f.read():
                continue
        jvm, ended_workers = _cpu(child)  # the JVM's children are Python workers
        out["jvm"] += jvm
        out["workers"] += ended_workers
        stack = list(children.get(child, []))
        while stack:
            worker = stack.pop()
            out["workers"] += sum(_cpu(worker))
            stack += children.get(worker, [])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pipeline_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    from pipeline.session import local_session

    values = [b"x" * (100 + i % 101) for i in range(args.records)]
    per_million = 1_000_000 / args.records
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-cpu-") as root, Ebb(Path(root)) as broker:
        bootstrap = broker.bootstrap
        spark = local_session("bench-pipeline-cpu", long_running=True)
        try:
            warm_up(spark, bootstrap, ("ebb",))
            rows = rows_to_write(spark, args.records)
            print(f"CPU-seconds per million records ({args.records} records of 100-200 B, {PARTITIONS} partitions)")
            for rep in range(args.reps):
                loads = [
                    ("ebb write", lambda t: spark_write(rows, bootstrap, t)),
                    ("librdkafka write", lambda t: librdkafka_produce(bootstrap, t, values)),
                    ("ebb read", lambda t: spark_read(spark, bootstrap, t, args.records)),
                    ("librdkafka read", lambda t: librdkafka_consume(bootstrap, t, args.records)),
                ]
                for name, load in loads:
                    who, what = name.split()
                    target = f"cpu-{rep}-{who}" if what == "write" else f"cpu-{rep}-librdkafka"  # reads: its records
                    if what == "write":
                        create_topic(bootstrap, target, PARTITIONS)
                    before, started = snapshot(broker.pid), time.perf_counter()
                    load(target)
                    wall = time.perf_counter() - started
                    after = snapshot(broker.pid)
                    used = {k: (after[k] - before[k]) * per_million for k in before}
                    print(f"{name:<17} {args.records / wall:>10,.0f} rec/s  wall {wall * per_million:5.2f} s  "
                          + "  ".join(f"{k} {v:4.2f}" for k, v in used.items())
                          + f"  total {sum(used.values()):4.2f}  load {os.getloadavg()[0]:.1f}", flush=True)
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
