"""A three-stage pipeline whose intermediate topics stay small: the loop of docs/pipeline.md, shown.

    python -m pipeline.jobs.demo [--records 300000] [--rounds 10] [--png pipeline-demo.png]

events --stage 1--> demo-parsed --stage 2--> demo-enriched --stage 3--> demo-totals

Each round produces a share of the records into `demo-events` and runs the three stages as
AvailableNow streaming queries. Stages 2 and 3 read with a consumer group (kafka.group.id) and the
intermediate topics set `retention.committed.groups` to that group, so the broker trims each one as
soon as the stage after it has processed a batch. No line of the demo commits or deletes anything.
After every stage it prints the bytes on disk of the topics (and draws them with --png), and it ends
by checking that the records and the sum of their amounts in `demo-totals` match the source.

Without --bootstrap it starts its own broker in a temporary directory (the bytes on disk are read from
the broker's log directory, so with --bootstrap give --log-dir too).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from pyspark.sql import SparkSession

from client import EARLIEST, Admin, Consumer, Producer
from client.probe import answers

SOURCE, PARSED, ENRICHED, TOTALS = "demo-events", "demo-parsed", "demo-enriched", "demo-totals"
PARTITIONS = 4
STAGES = ((SOURCE, PARSED, None), (PARSED, ENRICHED, "demo-stage2"), (ENRICHED, TOTALS, "demo-stage3"))


@dataclass
class Sample:
    elapsed_s: float
    label: str
    bytes_by_topic: dict[str, int]


@dataclass
class DemoResult:
    samples: list[Sample] = field(default_factory=list)
    source_records: int = 0
    source_amount: int = 0
    total_records: int = 0
    total_amount: int = 0


def topic_bytes(log_dir: Path, topic: str) -> int:
    """Bytes of the topic's segment files (.log) on disk, over its partitions."""
    total = 0
    for directory in log_dir.glob(f"{topic}-*"):
        if directory.name.rsplit("-", 1)[1].isdigit():
            total += sum(f.stat().st_size for f in directory.iterdir() if f.name.endswith(".log"))
    return total


async def create_topics(bootstrap: str, segment_bytes: int) -> None:
    small = {"segment.bytes": str(segment_bytes), "file.delete.delay.ms": "0"}
    async with Admin(bootstrap) as admin:
        for topic, configs in ((SOURCE, {}), (PARSED, {**small, "retention.committed.groups": "demo-stage2"}),
                               (ENRICHED, {**small, "retention.committed.groups": "demo-stage3"}), (TOTALS, {})):
            await admin.create_topic(topic, num_partitions=PARTITIONS, configs=configs)
            await admin.wait_for_leaders(topic)


async def produce_events(bootstrap: str, count: int, first: int, rng: random.Random) -> int:
    """`count` records of 100-200 bytes ("user-N,amount,padding"); returns the sum of their amounts."""
    amount_sum = 0
    async with Producer(bootstrap, acks=-1) as producer:
        for start in range(0, count, 5000):
            batches: dict[tuple[str, int], list] = {}
            for i in range(first + start, first + min(count, start + 5000)):
                amount = rng.randint(1, 1000)
                amount_sum += amount
                value = f"user-{i % 997},{amount},".encode() + b"x" * rng.randint(80, 180)
                batches.setdefault((SOURCE, i % PARTITIONS), []).append((f"user-{i % 997}".encode(), value))
            results = await producer.send_batches(batches)
            failed = {tp: r.error.name for tp, r in results.items() if not r.ok}
            if failed:
                raise RuntimeError(f"producing the demo's events failed: {failed}")
    return amount_sum


async def read_totals(bootstrap: str) -> tuple[int, int]:
    async with Admin(bootstrap) as admin:
        consumer = Consumer(admin.cluster)
        consumer.assign({(TOTALS, p): EARLIEST for p in range(PARTITIONS)})
        records = await consumer.read_to_end(timeout_ms=60000)
    return len(records), sum(int(r.value.split(b",")[1]) for r in records)


def run_stage(spark: SparkSession, bootstrap: str, source: str, target: str, group: str | None,
              checkpoints: Path) -> None:
    reader = (spark.readStream.format("ebb").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", 20000))
    if group is not None:
        reader = reader.option("kafka.group.id", group)
    # each stage changes the record a little: the parsed amount first, then a tag
    if source == SOURCE:
        step = "concat_ws(',', split(cast(value as string), ',')[0], split(cast(value as string), ',')[1], 'parsed')"
    else:
        step = "concat(cast(value as string), ',', 'seen')"
    query = (reader.load().selectExpr("key", f"{step} as value").writeStream.format("ebb")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", target)
             .option("checkpointLocation", str(checkpoints / target)).trigger(availableNow=True).start())
    try:
        if not query.awaitTermination(600):
            raise RuntimeError(f"stage {source} -> {target} still running after 600 s")
    finally:
        query.stop()


def run(spark: SparkSession, bootstrap: str, log_dir: Path, work_dir: Path, *, records: int, rounds: int,
        segment_bytes: int, report=print) -> DemoResult:
    asyncio.run(create_topics(bootstrap, segment_bytes))
    rng = random.Random(16)
    result = DemoResult()
    started = time.monotonic()

    def sample(label: str) -> None:
        sizes = {t: topic_bytes(log_dir, t) for t in (SOURCE, PARSED, ENRICHED)}
        result.samples.append(Sample(time.monotonic() - started, label, sizes))
        report(f"{time.monotonic() - started:7.1f}s  {label:<22}" + "".join(
            f"  {t} {sizes[t] / 1e6:7.2f} MB" for t in sizes))

    sample("start")
    for round_ in range(rounds):
        count = records // rounds + (1 if round_ < records % rounds else 0)
        result.source_amount += asyncio.run(produce_events(bootstrap, count, result.source_records, rng))
        result.source_records += count
        sample(f"round {round_ + 1}: produced")
        for index, (source, target, group) in enumerate(STAGES, 1):
            run_stage(spark, bootstrap, source, target, group, work_dir / "checkpoints")
            sample(f"round {round_ + 1}: stage {index}")
    result.total_records, result.total_amount = asyncio.run(read_totals(bootstrap))
    return result


def draw(result: DemoResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 4.5))
    times = [s.elapsed_s for s in result.samples]
    for topic, style in ((SOURCE, "--"), (PARSED, "-"), (ENRICHED, "-")):
        note = " (source, never trimmed)" if topic == SOURCE else " (intermediate)"
        axes.plot(times, [s.bytes_by_topic[topic] / 1e6 for s in result.samples], style, marker=".",
                  label=topic + note)
    axes.set_xlabel("seconds since the demo started")
    axes.set_ylabel("MB of segments on disk")
    axes.set_title(f"{result.source_records:,} records through three stages: intermediate topics stay small")
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: Path) -> tuple[subprocess.Popen, str, Path]:
    port = free_port()
    log_dir = data_dir / "logs"
    args = [sys.executable, "-m", "broker", "--override", "node.id=1", "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={log_dir}"]
    with open(data_dir / "broker.log", "ab") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the broker exited with {process.returncode}; see {data_dir / 'broker.log'}")
        if answers("127.0.0.1", port):  # its port accepts a moment before it serves
            return process, f"127.0.0.1:{port}", log_dir
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the broker did not answer within 60 s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.jobs.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000, help="records to push through (default 300000)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of producing and running the stages")
    # a segment must hold the sink's largest batch (up to 5000 records); whole segments are what disk space
    # is freed in, so smaller ones follow the trimmed start more closely
    parser.add_argument("--segment-bytes", type=int, default=1 << 20,
                        help="segment.bytes of the intermediate topics (default 1 MiB, Kafka's minimum)")
    parser.add_argument("--png", type=Path, help="draw the bytes on disk over time into this PNG (matplotlib)")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one (needs --log-dir)")
    parser.add_argument("--log-dir", type=Path, help="that broker's log.dirs, to measure bytes on disk")
    args = parser.parse_args(argv)
    if (args.bootstrap is None) != (args.log_dir is None):
        parser.error("--bootstrap and --log-dir go together")
    if args.records < args.rounds or args.rounds < 1:
        parser.error("--records must be at least --rounds, and --rounds at least 1")

    from pipeline.session import local_session

    # stdout is for the report: the client's logs go to stderr, warnings only
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                        logger_factory=lambda *args: structlog.PrintLogger(sys.stderr))  # stderr as it is now
    with tempfile.TemporaryDirectory(prefix="ebb-demo-") as tmp:
        work_dir = Path(tmp)
        broker = None
        bootstrap, log_dir = args.bootstrap, args.log_dir
        if bootstrap is None:
            broker, bootstrap, log_dir = start_broker(work_dir)
        spark = local_session("ebb-demo")
        try:
            result = run(spark, bootstrap, log_dir, work_dir, records=args.records, rounds=args.rounds,
                         segment_bytes=args.segment_bytes)
        finally:
            spark.stop()
            if broker is not None:
                broker.terminate()
                broker.wait(30)
    peak = {t: max(s.bytes_by_topic[t] for s in result.samples) for t in (SOURCE, PARSED, ENRICHED)}
    print(f"source: {result.source_records} records, amounts summing to {result.source_amount}")
    print(f"totals: {result.total_records} records, amounts summing to {result.total_amount}")
    print("peak bytes on disk: " + ", ".join(f"{t} {b / 1e6:.2f} MB" for t, b in peak.items()))
    if args.png is not None:
        draw(result, args.png)
        print(f"drew {args.png}")
    matches = (result.total_records, result.total_amount) == (result.source_records, result.source_amount)
    print("totals match the source" if matches else "TOTALS DO NOT MATCH THE SOURCE")
    return 0 if matches else 1


if __name__ == "__main__":
    sys.exit(main())
