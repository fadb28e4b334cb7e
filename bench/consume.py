"""Consume throughput, Ebb beside Apache Kafka and Tansu: `python -m bench.consume [--quick] [--reps N] [--dir PATH]`.

For each case (1 KiB and 100 B records, 1 and 6 partitions), the three brokers are started fresh
(Ebb and Kafka persisting to disk, Tansu with its memory engine; bench/peers.py) and given the same
records (produced with acks=1, as bench/produce.py does, not timed). Then each repetition reads all
of them from offset 0 with a new confluent-kafka consumer (assigned partitions, no group;
fetch.queue.backoff.ms=10, librdkafka's other defaults) on each broker in turn, the order rotated
every repetition. The time runs from the first record received to the last. Prints the medians:
MB/s (10^6 bytes of record values), records/s, the broker's CPU-seconds per GB sent, and Ebb's
ratios to Kafka and to Tansu. Before the first run a consumer with a group.id commits once on each
broker, so the group coordinator's set-up (Ebb creates `__consumer_offsets`) is not timed. Reads
come from the page cache (the data was just written), as a consumer keeping up with producers reads.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from bench.peers import (
    CONSUMER_DEFAULTS,
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
    warm_up,
)
from bench.produce import KiB, produce_load

TOPIC = "bench-consume"


def consume_load(bootstrap: str, topic: str, partitions: int, count: int) -> tuple[float, int]:
    """Read `count` records from offset 0 of every partition: (seconds from the first batch received to
    the last, records received after the first batch)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-consume", **CONSUMER_DEFAULTS})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        consume = consumer.consume
        got = 0
        deadline = time.monotonic() + 120
        first = None
        while got < count:
            batch = consume(10_000, 1.0)
            if not batch:
                if time.monotonic() > deadline:
                    raise KafkaException(f"only {got} of {count} records consumed")
                continue
            if first is None:
                first = time.perf_counter()
                # The clock starts at the first batch: count from the second one on.
                skipped = len(batch)
            for message in batch:
                if message.error() is not None:
                    raise KafkaException(message.error())
            got += len(batch)
        elapsed = time.perf_counter() - first
        return elapsed, got - skipped
    finally:
        consumer.close()


def run_case(value_size: int, partitions: int, records: int, root: Path, reps: int) -> dict[str, dict]:
    results: dict[str, dict[str, list[float]]] = {name: {"mb_s": [], "rec_s": [], "cpu_gb": []} for name in PEERS}
    with Ebb(root) as ebb, Kafka(root) as kafka, Tansu(root) as tansu:
        for broker in (ebb, kafka, tansu):
            warm_up(broker.bootstrap)
            create_topic(broker.bootstrap, TOPIC, partitions)
            produce_load(broker.bootstrap, TOPIC, partitions, records, value_size, "1")
        for rep in range(reps):
            for broker in alternate([ebb, kafka, tansu], rep):
                before = broker.cpu_seconds()
                seconds, timed_records = consume_load(broker.bootstrap, TOPIC, partitions, records)
                cpu = broker.cpu_seconds() - before
                r = results[broker.name]
                r["mb_s"].append(timed_records * value_size / seconds / 1e6)
                r["rec_s"].append(timed_records / seconds)
                r["cpu_gb"].append(cpu / (records * value_size / 1e9))
    shutil.rmtree(ebb.data_dir, ignore_errors=True)
    shutil.rmtree(kafka.node.data_dir, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(parser, "fewer records and repetitions")
    args = parser.parse_args()
    reps = repetitions(args)
    kib_records, small_records = (100_000, 400_000) if args.quick else (400_000, 2_000_000)
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-consume-", dir=args.dir))
    print(f"Consume throughput, Ebb and Kafka (disk, {root}) beside Tansu (memory engine); {machine_line()}")
    print(f"medians of {reps} repetitions per broker, rotating" + (" (--quick: fewer records)" if args.quick
                                                                     else ""))
    widths = throughput_header(22)
    try:
        for value_size in (KiB, 100):
            for partitions in (1, 6):
                records = kib_records if value_size == KiB else small_records
                size = "1 KiB" if value_size == KiB else f"{value_size} B"
                throughput_row(f"{size}, {partitions} part", run_case(value_size, partitions, records, root, reps),
                               widths)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
