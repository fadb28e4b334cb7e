"""Python bytecode per request on a broker under load: `python -m bench.opcodes
{java-produce,java-consume,produce,rdkafka-consume} [--partitions N] [--records N] [--top N]
[--lines N]`.

A deterministic measure of the broker's own Python work, for comparing two versions of the code on a
machine whose timings swing from run to run (no hardware counters in a VM, steal time): the broker
runs under bench/traced_broker.py, which counts every opcode the event loop's thread executes once the
load starts, and the load is one of bench.profile's (Kafka's ProducerPerformance or
ConsumerPerformance, librdkafka's producer of bench.produce, or bench.goals' C consumer on
librdkafka reading the topic from offset 0). Prints the opcodes and Python calls
per request served (every API; the loads are nearly all Produce or Fetch) and the functions with the
most, per request (`--lines N`: and the N lines with the most, slower still). C code (uvloop, struct,
crc32c, the kernel) is not counted: pair it with bench.profile or perf for where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.peers import Ebb, create_topic, warm_up

KiB = 1024
_SERVE = "Connection._serve ("  # one call per request served (broker/server.py)


class TracedEbb(Ebb):
    def __init__(self, root: Path, counts: Path, overrides: dict[str, str] | None = None,
                 by_line: bool = False) -> None:
        super().__init__(root, overrides)
        self.counts = counts
        self.by_line = by_line

    def command(self) -> list[str]:
        return [sys.executable, "-m", "bench.traced_broker", *super().command()[3:]]  # after "python -m broker"

    def env(self) -> dict[str, str]:
        return {**super().env(), "EBB_OPCODES_OUT": str(self.counts),
                **({"EBB_OPCODES_LINES": "1"} if self.by_line else {})}


def run_load(load: str, bootstrap: str, partitions: int, records: int) -> None:
    if load == "produce":
        from bench.produce import produce_load

        produce_load(bootstrap, "opcodes", partitions, records, KiB)
        return
    if load == "rdkafka-consume":
        from bench.goals import rdkafka_consume

        rdkafka_consume(bootstrap, "opcodes", partitions, records)
        return
    from bench.perf_tools import consumer_perf, producer_perf

    if load == "java-produce":
        producer_perf(bootstrap, "opcodes", records, KiB)
    else:
        consumer_perf(bootstrap, "opcodes", records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("load", choices=["java-produce", "java-consume", "produce", "rdkafka-consume"])
    parser.add_argument("--partitions", type=int, default=6, help="of the topic (default 6)")
    parser.add_argument("--records", type=int, default=100_000,
                        help="1 KiB records (default 100,000: tracing slows the broker down a lot)")
    parser.add_argument("--top", type=int, default=30, help="functions listed")
    parser.add_argument("--lines", type=int, default=0, help="lines listed (default none: not counted)")
    parser.add_argument("--ebb-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker property (repeatable), e.g. max.incremental.fetch.session.cache.slots=0")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-opcodes-"))
    counts = root / "counts.json"
    try:
        overrides = dict(item.split("=", 1) for item in args.ebb_override)
        with TracedEbb(root, counts, overrides, by_line=args.lines > 0) as ebb:
            create_topic(ebb.bootstrap, "opcodes", args.partitions)
            if args.load in ("java-consume", "rdkafka-consume"):
                from bench.goals import rdkafka_produce

                warm_up(ebb.bootstrap)
                rdkafka_produce(ebb.bootstrap, "opcodes", args.partitions, args.records, "1")
            os.kill(ebb.pid, signal.SIGUSR1)
            time.sleep(0.5)
            run_load(args.load, ebb.bootstrap, args.partitions, args.records)
        found = json.loads(counts.read_text())  # written when the broker exits
    finally:
        shutil.rmtree(root, ignore_errors=True)
    opcodes, calls = found["opcodes"], found["calls"]
    requests = sum(n for name, n in calls.items() if name.startswith(_SERVE))
    if not requests:
        sys.exit("no request was counted")
    print(f"Ebb under {args.load}, {args.partitions} partition(s), {args.records:,} records of 1 KiB: "
          f"{requests:,} requests served")
    print(f"per request: {sum(opcodes.values()) / requests:,.0f} Python opcodes, "
          f"{sum(calls.values()) / requests:,.0f} Python calls; per 1,000 records: "
          f"{sum(opcodes.values()) * 1000 / args.records:,.0f} opcodes (overrides: {args.ebb_override or 'none'})\n")
    print(f"{'opcodes':>9} {'calls':>7}  function (per request)")
    for name, n in sorted(opcodes.items(), key=lambda item: -item[1])[:args.top]:
        print(f"{n / requests:9.0f} {calls.get(name, 0) / requests:7.1f}  {name}")
    if args.lines:
        print(f"\n{'opcodes':>9}  line (per request)")
        for name, n in sorted(found["lines"].items(), key=lambda item: -item[1])[:args.lines]:
            print(f"{n / requests:9.1f}  {name}")


if __name__ == "__main__":
    main()
