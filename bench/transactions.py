"""Transactions, Ebb beside Apache Kafka: `python -m bench.transactions [--quick] [--reps N]`.

One partition, 100-byte records, librdkafka's transactional producer (confluent-kafka, linger.ms=5):
- produce with a commit every 10,000 records, and with a commit every 100 ms: records/s over the run
  (commits included);
- a read_committed consumer reading the first run's records back: records/s;
- the cost of a commit: 300 transactions of one record each, the time of each commit_transaction()
  (EndTxn's round trip plus waiting for the markers' effect the client needs): p50 and p99.
Both brokers are started once (each persisting to disk); each repetition uses new topics and a new
transactional id on each, the order rotated. Prints the medians over repetitions and Ebb ÷ Kafka
(records/s: > 1 is Ebb faster; commit time: < 1 is Ebb faster).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from bench.peers import (
    CONSUMER_DEFAULTS,
    Ebb,
    Kafka,
    alternate,
    create_topic,
    kafka_version,
    median,
    percentile,
    ratio,
    repetitions,
    run_arguments,
    warm_up,
)

VALUE = b"v" * 100
CASES = ("commit every 10,000", "commit every 100 ms", "read_committed consume", "commit p50 ms", "commit p99 ms")


def _producer(bootstrap: str, transactional_id: str):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5})
    producer.init_transactions(60)
    return producer


def produce_run(bootstrap: str, topic: str, transactional_id: str, count: int, *, every_records: int | None,
                every_s: float | None) -> float:
    """Records/s for `count` records in transactions ended by size or by time."""
    producer = _producer(bootstrap, transactional_id)
    started = time.monotonic()
    producer.begin_transaction()
    in_txn, opened = 0, started
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        in_txn += 1
        if (every_records and in_txn >= every_records) or (every_s and time.monotonic() - opened >= every_s):
            producer.commit_transaction(60)
            producer.begin_transaction()
            in_txn, opened = 0, time.monotonic()
    producer.commit_transaction(60)
    return count / (time.monotonic() - started)


def consume_run(bootstrap: str, topic: str, count: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "isolation.level": "read_committed", **CONSUMER_DEFAULTS})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, started = 0, time.monotonic()
    try:
        while got < count and time.monotonic() - started < 120:
            got += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
    finally:
        consumer.close()
    return got / (time.monotonic() - started)


def commit_times(bootstrap: str, topic: str, transactional_id: str, count: int) -> list[float]:
    producer = _producer(bootstrap, transactional_id)
    times = []
    for _ in range(count):
        producer.begin_transaction()
        producer.produce(topic, VALUE, partition=0)
        producer.flush(30)
        started = time.perf_counter()
        producer.commit_transaction(60)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    run_arguments(parser, "fewer records and transactions")
    args = parser.parse_args()
    records = 50_000 if args.quick else 200_000
    commits = 100 if args.quick else 300
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench-txn-"))
    print(f"{kafka_version()} beside Ebb; Tansu has no transactions here, so it is not run")
    results: dict[str, dict[str, list[float]]] = {"ebb": {c: [] for c in CASES}, "kafka": {c: [] for c in CASES}}
    brokers = {"ebb": Ebb(root).start(), "kafka": Kafka(root).start()}
    try:
        for broker in brokers.values():
            warm_up(broker.bootstrap)
        for rep in range(repetitions(args)):
            for name in alternate(list(brokers), rep):
                bootstrap = brokers[name].bootstrap
                sized, timed, small = (f"txn-{kind}-{rep}" for kind in ("sized", "timed", "small"))
                for topic in (sized, timed, small):
                    create_topic(bootstrap, topic, 1)
                r = results[name]
                r["commit every 10,000"].append(produce_run(bootstrap, sized, f"sized-{rep}", records,
                                                            every_records=10_000, every_s=None))
                r["commit every 100 ms"].append(produce_run(bootstrap, timed, f"timed-{rep}", records,
                                                            every_records=None, every_s=0.1))
                r["read_committed consume"].append(consume_run(bootstrap, sized, records))
                times = commit_times(bootstrap, small, f"small-{rep}", commits)
                r["commit p50 ms"].append(percentile(times, 0.50))
                r["commit p99 ms"].append(percentile(times, 0.99))
    finally:
        for broker in brokers.values():
            broker.stop()
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"  {'case':<24} {'Ebb':>12} {'Kafka':>12} {'Ebb÷Kafka':>10}")
    for case in CASES:
        e, k = median(results["ebb"][case]), median(results["kafka"][case])
        timed = case.startswith("commit p")
        form = "{:,.1f}" if timed else "{:,.0f}"
        unit = "" if timed else " rec/s"
        print(f"  {case + unit:<24} {form.format(e):>12} {form.format(k):>12} {ratio(e, k):>10}", flush=True)


if __name__ == "__main__":
    main()
