"""Produce throughput, Ebb beside Apache Kafka and Tansu: `python -m bench.produce [--quick] [--reps N] [--dir PATH]`.

For each case (1 KiB and 100 B records, 1 and 6 partitions, acks=1 and acks=all), the three brokers
are started fresh (Ebb and Kafka persisting to disk, Tansu with its memory engine; bench/peers.py),
then each repetition produces the same records to a new topic on each broker in turn (the order
rotated every repetition), with confluent-kafka (librdkafka; linger.ms=5, no compression, not
idempotent). The time runs from the first produce() to the end of flush(), when every record is
acknowledged. Prints the medians: MB/s (10^6 bytes of record values), records/s, and the broker's
CPU-seconds per GB (10^9 bytes of values) from /proc/<pid>/stat, and Ebb's ratios to Kafka and to
Tansu (> 1 is Ebb faster for MB/s; < 1 is Ebb cheaper for CPU-s/GB). The brokers and the client
share the machine's cores. The first repetition also warms Kafka's JIT compiler.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.peers import (
    PEERS,
    Ebb,
    Kafka,
    Tansu,
    alternate,
    create_topic,
    machine_line,
    repetitions,
    run_arguments,
    throughput_header,
    throughput_row,
)

KiB = 1024


@dataclass
class Case:
    value_size: int
    partitions: int
    acks: str
    records: int

    @property
    def label(self) -> str:
        size = "1 KiB" if self.value_size == KiB else f"{self.value_size} B"
        return f"{size}, {self.partitions} part, acks={self.acks}"


def produce_load(bootstrap: str, topic: str, partitions: int, count: int, value_size: int, acks: str = "1",
                 **config) -> float:
    """Produce `count` records of `value_size` bytes round robin over the partitions; seconds taken
    until all are acknowledged. Raises if any delivery failed."""
    from confluent_kafka import KafkaException, Producer

    failures: list = []

    def on_delivery(err, _msg) -> None:  # delivery.report.only.error: called for failures only
        failures.append(err)

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "compression.type": "none",
        "enable.idempotence": False, "queue.buffering.max.messages": 500_000,
        "delivery.report.only.error": True, "on_delivery": on_delivery, **config,
    })
    # Connect and learn the metadata before the clock starts.
    producer.list_topics(topic, timeout=10)
    value = os.urandom(value_size)
    produce = producer.produce
    poll = producer.poll
    start = time.perf_counter()
    for i in range(count):
        partition = 0 if partitions == 1 else i % partitions
        try:
            produce(topic, value, partition=partition)
        except BufferError:  # the local queue is full: wait until the broker has taken some of it
            while True:
                poll(0.005)
                try:
                    produce(topic, value, partition=partition)
                    break
                except BufferError:
                    continue
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left or failures:
        raise KafkaException(f"{left} records unacknowledged, {len(failures)} failed: {failures[:3]}")
    return elapsed


def cases(quick: bool) -> list[Case]:
    kib_records, small_records = (100_000, 400_000) if quick else (400_000, 2_000_000)
    return [Case(size, partitions, acks, kib_records if size == KiB else small_records)
            for size in (KiB, 100) for partitions in (1, 6) for acks in ("1", "all")]


def run_case(case: Case, root: Path, reps: int) -> dict[str, dict[str, list[float]]]:
    results: dict[str, dict[str, list[float]]] = {name: {"mb_s": [], "rec_s": [], "cpu_gb": []} for name in PEERS}
    with Ebb(root) as ebb, Kafka(root) as kafka, Tansu(root) as tansu:
        for rep in range(reps):
            for broker in alternate([ebb, kafka, tansu], rep):
                topic = f"bench-{rep}"
                create_topic(broker.bootstrap, topic, case.partitions)
                before = broker.cpu_seconds()
                seconds = produce_load(broker.bootstrap, topic, case.partitions, case.records, case.value_size,
                                       case.acks)
                cpu = broker.cpu_seconds() - before
                payload = case.records * case.value_size
                r = results[broker.name]
                r["mb_s"].append(payload / seconds / 1e6)
                r["rec_s"].append(case.records / seconds)
                r["cpu_gb"].append(cpu / (payload / 1e9))
    shutil.rmtree(ebb.data_dir, ignore_errors=True)
    shutil.rmtree(kafka.node.data_dir, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(parser, "fewer records and repetitions")
    parser.add_argument("--only", default=None, help="run only the cases whose label contains this")
    args = parser.parse_args()
    reps = repetitions(args)
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-produce-", dir=args.dir))
    print(f"Produce throughput, Ebb and Kafka (disk, {root}) beside Tansu (memory engine); {machine_line()}")
    print(f"medians of {reps} repetitions per broker, rotating" + (" (--quick: fewer records)" if args.quick
                                                                     else ""))
    widths = throughput_header(30)
    try:
        for case in cases(args.quick):
            if args.only and args.only not in case.label:
                continue
            throughput_row(case.label, run_case(case, root, reps), widths)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
