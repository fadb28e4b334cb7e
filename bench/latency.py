"""End-to-end latency, Ebb beside Apache Kafka and Tansu: `python -m bench.latency [--quick] [--reps N] [--rate R]`.

A producer process sends 1 KiB records to one partition at a fixed rate (default 2,000 records/s;
confluent-kafka, linger.ms=0, acks=all), each carrying its send time (CLOCK_MONOTONIC, which every
process on the machine shares). A long-polling consumer in this process (assigned from offset 0,
fetch.wait.max.ms=500 and fetch.min.bytes=1, librdkafka's defaults; fetch.queue.backoff.ms=10)
takes the time each record arrives. Latency = arrival - send: producer queueing, the produce
request, the broker's append and high watermark move, the wake-up of the parked fetch, and the fetch
response. The first second of each run is warm-up and not counted. The three brokers are started
once (Ebb and Kafka persisting to disk, Tansu with its memory engine; bench/peers.py); each
repetition uses a new topic on each broker in turn (the order rotated every repetition). Prints the
medians over repetitions of p50/p99/p99.9 and Ebb's ratios to Kafka and to Tansu (< 1 is Ebb faster).
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import struct
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
    header,
    machine_line,
    median,
    percentile,
    ratio,
    repetitions,
    row,
    run_arguments,
    warm_up,
)

STAMP = struct.Struct(">qq")  # sequence number, send time (ns)
VALUE_SIZE = 1024
WARMUP_S = 1.0


def _producer_main(bootstrap: str, topic: str, rate: float, count: int, ready) -> None:
    """Child process: `count` records at `rate` per second, each stamped with its send time."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                         "enable.idempotence": False})
    producer.list_topics(topic, timeout=10)
    padding = bytes(VALUE_SIZE - STAMP.size)
    ready.wait(30)
    start = time.monotonic()
    for i in range(count):
        due = start + i / rate
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        producer.produce(topic, STAMP.pack(i, time.monotonic_ns()) + padding, partition=0)
        producer.poll(0)
    producer.flush(30)


def measure(bootstrap: str, topic: str, rate: float, seconds: float, consumer_config: dict) -> list[float]:
    """Latencies in milliseconds of the records after the warm-up."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    count = int(rate * (seconds + WARMUP_S))
    warmup = int(rate * WARMUP_S)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency", **CONSUMER_DEFAULTS,
                         **consumer_config})
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.poll(0.5)  # connect, start fetching
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    producer = context.Process(target=_producer_main, args=(bootstrap, topic, rate, count, ready), daemon=True)
    producer.start()
    latencies: list[float] = []
    seen = 0
    deadline = time.monotonic() + seconds + WARMUP_S + 60
    try:
        ready.set()
        while seen < count:
            message = consumer.poll(0.5)
            now = time.monotonic_ns()
            if message is None:
                if time.monotonic() > deadline:
                    raise KafkaException(f"{bootstrap}: only {seen} of {count} records arrived")
                continue
            if message.error() is not None:
                raise KafkaException(message.error())
            sequence, sent = STAMP.unpack_from(message.value())
            seen += 1
            if sequence >= warmup:
                latencies.append((now - sent) / 1e6)
    finally:
        consumer.close()
        producer.join(30)
        if producer.is_alive():
            producer.kill()
    return latencies


WIDTHS = [24] + [10, 8, 8, 7, 7] * 3
MODES = [("long poll (500 ms)", {"fetch.wait.max.ms": 500, "fetch.min.bytes": 1})]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(parser, "shorter runs, fewer repetitions")
    parser.add_argument("--rate", type=float, default=2000.0, help="records per second (default 2000)")
    parser.add_argument("--seconds", type=float, default=None, help="measured seconds per run (default 8, quick 4)")
    args = parser.parse_args()
    reps = repetitions(args)
    seconds = args.seconds or (4.0 if args.quick else 8.0)
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-latency-", dir=args.dir))
    print(f"End-to-end latency, Ebb and Kafka (disk, {root}) beside Tansu (memory engine); {machine_line()}")
    print(f"1 KiB records, 1 partition, {args.rate:,.0f} records/s for {seconds:.0f} s after {WARMUP_S:.0f} s of "
          f"warm-up; medians of {reps} repetitions per broker, rotating")
    titles = ["consumer"]
    for figure in ("p50 ms", "p99", "p99.9"):
        titles += [f"Ebb {figure}", "Kafka", "Tansu", "÷Kafka", "÷Tansu"]
    header("", list(zip(titles, WIDTHS, strict=True)))
    try:
        with Ebb(root) as ebb, Kafka(root) as kafka, Tansu(root) as tansu:
            for broker in (ebb, kafka, tansu):
                warm_up(broker.bootstrap)  # the group coordinator's set-up is not measured
            for label, consumer_config in MODES:
                results = {name: {"p50": [], "p99": [], "p999": [], "max": []} for name in PEERS}
                for rep in range(reps):
                    for broker in alternate([ebb, kafka, tansu], rep):
                        topic = f"bench-latency-{label.split()[0]}-{rep}"
                        create_topic(broker.bootstrap, topic, 1)
                        latencies = measure(broker.bootstrap, topic, args.rate, seconds, consumer_config)
                        r = results[broker.name]
                        r["p50"].append(percentile(latencies, 0.50))
                        r["p99"].append(percentile(latencies, 0.99))
                        r["p999"].append(percentile(latencies, 0.999))
                        r["max"].append(max(latencies))
                cells = [label]
                for key in ("p50", "p99", "p999"):
                    e, k, t = (median(results[name][key]) for name in PEERS)
                    cells += [f"{e:.2f}", f"{k:.2f}", f"{t:.2f}", ratio(e, k), ratio(e, t)]
                row(cells, WIDTHS)
                per_run = "; ".join(f"{name} {', '.join(f'{v:.2f}' for v in results[name]['p99'])}" for name in PEERS)
                worst = ", ".join(f"{name} {max(results[name]['max']):.1f}" for name in PEERS)
                print(f"  {'':<{WIDTHS[0]}} per run p99: {per_run}; max: {worst} ms", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
