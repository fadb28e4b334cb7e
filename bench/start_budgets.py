"""What a new user waits for, against the budgets of issue 27: `python -m bench.start_budgets [--reps N]`.

  - `ebb --help`                                      budget 0.2 s
  - `ebb offsets --topic T` against a local broker    budget 0.5 s (wall, the whole process)
  - a broker on an empty data dir, spawn to its first answer (ApiVersions) budget 1 s

Each figure is the whole process timed from outside (interpreter start and imports included), the
median of --reps runs, with the fastest and slowest beside it. Each broker start gets a new, empty
data dir. Python's bytecode caching matters here: under PYTHONDONTWRITEBYTECODE (set on some CI and
sandboxes) every run compiles the project's modules from source, and the line above the table says
which case was measured.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.peers import Ebb, median

TOPIC = "bench-start-budgets"
EBB_SCRIPT = Path(sys.executable).with_name("ebb")


def timed(args: list[str]) -> float:
    """Wall seconds of one run of `ebb args` (it must succeed)."""
    start = time.monotonic()
    subprocess.run([str(EBB_SCRIPT), *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.monotonic() - start


def row(label: str, budget_s: float, runs: list[float]) -> None:
    within = "yes" if median(runs) <= budget_s else "NO"
    print(f"  {label:<40} {budget_s:>7.2f}s {median(runs):>8.3f}s {min(runs):>8.3f}s {max(runs):>8.3f}s  {within}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=7, help="runs of each (default 7)")
    parser.add_argument("--dir", default=None, help="where the brokers' data goes (default: system temp dir)")
    args = parser.parse_args()
    if not EBB_SCRIPT.exists():
        sys.exit(f"no `ebb` beside {sys.executable}: install the project (make run or make test)")
    bytecode = "not written (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "cached"
    print(f"Start-up budgets, Ebb; {os.cpu_count()} cpus, Python {sys.version.split()[0]}; bytecode {bytecode}")
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-budgets-", dir=args.dir))
    try:
        timed(["--help"])  # a first run writes what later runs reuse (bytecode, the specs' verdict)
        help_s = [timed(["--help"]) for _ in range(args.reps)]
        starts = []
        for _ in range(args.reps):
            broker = Ebb(root)
            broker.start()
            starts.append(broker.started_in_s)
            broker.stop()
            shutil.rmtree(broker.data_dir, ignore_errors=True)
        with Ebb(root) as broker:
            bootstrap = ["--bootstrap-server", broker.bootstrap]
            timed(["topics", "create", *bootstrap, "--topic", TOPIC, "--partitions", "3"])
            offsets_s = [timed(["offsets", *bootstrap, "--topic", TOPIC]) for _ in range(args.reps)]
        print(f"\n  {'':<40} {'budget':>8} {'median':>9} {'min':>9} {'max':>9}  within")
        row("ebb --help", 0.2, help_s)
        row("ebb offsets (3 partitions, local broker)", 0.5, offsets_s)
        row("broker, empty data dir: to first answer", 1.0, starts)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
