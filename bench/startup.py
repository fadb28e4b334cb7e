"""Start-up time of Ebb with 1,000 partitions: `python -m bench.startup [--quick] [--reps N] [--dir PATH]`.

One topic of 1,000 partitions gets records in every partition (confluent-kafka, 1 KiB values), then
the broker is stopped and started again, alternately:
  - after a clean stop (SIGTERM: logs flushed, checkpoints and the clean-shutdown marker written, so
    loading reads no batches);
  - after an unclean stop (SIGKILL right after more records were produced and acknowledged, never
    flushed: every partition is recovered from its recovery point, each batch's CRC checked, and
    the indexes rebuilt).
Start-up time = from spawning `python -m broker` to its first answer (an ApiVersions; Ebb listens only
once every log is loaded), then to the first Metadata answer listing all partitions with leaders.
The interpreter's own start and imports are included; an empty broker's start is shown for scale.

Tansu is shown for scale only: its memory engine has nothing to recover (a restart loses every
record and topic), so its figure is an empty broker's start.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import tempfile
import time
from pathlib import Path

from bench.peers import Ebb, Tansu, create_topic, machine_line, median, repetitions, run_arguments
from bench.produce import KiB, produce_load

TOPIC = "bench-startup"


def ready_in(broker: Ebb, partitions: int) -> tuple[float, float]:
    """Start the (stopped) broker; seconds to its first answer and to a complete Metadata answer."""
    from confluent_kafka.admin import AdminClient

    start = time.monotonic()
    broker.start()
    answering = time.monotonic() - start
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    while True:
        topic = admin.list_topics(TOPIC, timeout=30).topics.get(TOPIC)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions and all(
                p.leader >= 0 for p in topic.partitions.values()):
            return answering, time.monotonic() - start
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(parser, "less data, fewer repetitions", "restarts of each kind")
    args = parser.parse_args()
    reps = repetitions(args)
    partitions = 1000
    per_partition = 20 if args.quick else 100
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-startup-", dir=args.dir))
    print(f"Start-up time, Ebb (disk, {root}); {machine_line()}")
    try:
        with Tansu(root) as tansu:
            tansu_s = tansu.started_in_s
        empty = Ebb(root)
        empty_s = [ready_in_empty(empty) for _ in range(reps)]
        empty.stop()

        broker = Ebb(root)
        broker.start()
        create_topic(broker.bootstrap, TOPIC, partitions)
        produce_load(broker.bootstrap, TOPIC, partitions, per_partition * partitions, KiB)
        data_mib = per_partition * partitions * KiB / 2**20
        clean: list[tuple[float, float]] = []
        unclean: list[tuple[float, float]] = []
        for rep in range(reps):
            broker.stop(signal.SIGTERM)
            clean.append(ready_in(broker, partitions))
            produce_load(broker.bootstrap, TOPIC, partitions, 10 * partitions, KiB)  # unflushed
            broker.stop(signal.SIGKILL)
            unclean.append(ready_in(broker, partitions))
            data_mib += 10 * partitions * KiB / 2**20
            del rep
        broker.stop()
        print(f"\n{partitions:,} partitions, {data_mib:,.0f} MiB of 1 KiB records; medians of {reps} restarts each")
        print(f"  {'':<46} {'answering':>10} {'Metadata answered':>18}")
        print(f"  {'Ebb, empty (interpreter, imports, no logs)':<46} {median(empty_s):>9.2f}s")
        print(f"  {'Ebb after a clean stop (SIGTERM)':<46} {median([c[0] for c in clean]):>9.2f}s "
              f"{median([c[1] for c in clean]):>17.2f}s")
        print(f"  {'Ebb after an unclean stop (SIGKILL, recovery)':<46} {median([u[0] for u in unclean]):>9.2f}s "
              f"{median([u[1] for u in unclean]):>17.2f}s")
        print(f"  {'Tansu 0.6, memory engine, empty':<46} {tansu_s:>9.2f}s   (nothing to recover: its memory "
              "engine keeps no data across a restart)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def ready_in_empty(broker: Ebb) -> float:
    start = time.monotonic()
    broker.start()
    elapsed = time.monotonic() - start
    broker.stop()
    return elapsed


if __name__ == "__main__":
    main()
