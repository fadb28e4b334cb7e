"""format("ebb") beside plain librdkafka: `python -m bench.pipeline [--records N] [--reps N] [--quick]`.

One Ebb broker (fresh, on disk), one topic of four partitions, records of 100-200 bytes.
- write: N rows produced by `df.write.format("ebb")` from a DataFrame built in Spark (spark.range,
  so no Python reading feeds it) and cached in the JVM before the time starts, beside N records from
  one confluent-kafka Producer (acks=all, librdkafka's defaults otherwise: batching, no compression)
  whose values are built before its time starts.
- read: the same N records read by `spark.read.format("ebb")...load()` into a no-op sink (every row
  crosses into the JVM), beside one confluent-kafka Consumer (assigned partitions, no group).
- reader: one partition read by pipeline/fast_read.py alone (no Spark) beside a bare consume() loop.
- Spark's own Kafka connector (format("kafka"), the jars `make bench` fetches) writes and reads the same
  way, beside format("ebb") in the same session.
Spark runs local[2] with the settings of pipeline/session.py for a long-running job (the JVM's default
JIT, not the tests' quick-start flags). Nothing is timed before warm_up: a write through each Spark source,
then every reader (format("ebb"), format("kafka"), the librdkafka consumer) reads the same warm topic the
same number of times, then each writer (both Spark sources and the librdkafka producer) writes rounds of
WARM_RECORDS until each Spark source's two last rounds agree within 15%, so that neither Python worker start-up
nor the JVM's compilation of the row conversion is timed, and each reader and writer gets the same warm-up.
Prints the median records/s of each, the ratio ebb/librdkafka, and each repetition's figures (their spread).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.peers import CONSUMER_DEFAULTS, Ebb, create_topic
from tests.support.spark_kafka import connector_conf

PARTITIONS = 4
WARM_RECORDS = 500_000  # written by each Spark source into the warm topic
# Rows each reader reads from the warm topic before anything is timed. The Spark JVM's task threads reach
# their steady cost per row within a million rows, but its C2 compiler threads go on compiling for about
# nine reads of a million, at 0.2-0.5 CPU-s per million rows read, taken from the same two cores
WARM_ROWS = 10_000_000
# Write rounds: after the reads' warm-up one write of half a million rows left the first timed format("ebb")
# write at 0.34-0.85x of the next ones in every run of 2026-11-27 to 29 (the JVM still compiling the write
# path), so rounds go on until the last two of each Spark source agree within WRITES_AGREE
WRITE_ROUNDS = 8
WRITES_AGREE = 0.15


def librdkafka_produce(bootstrap: str, topic: str, values: list[bytes]) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    started = time.perf_counter()
    for i, value in enumerate(values):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError("librdkafka did not deliver every record in 120 s")
    return time.perf_counter() - started


def librdkafka_consume(bootstrap: str, topic: str, count: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-pipeline", **CONSUMER_DEFAULTS})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        started, got, deadline = time.perf_counter(), 0, time.monotonic() + 300
        while got < count and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
        if got < count:
            raise RuntimeError(f"librdkafka read {got} of {count} records")
        return time.perf_counter() - started
    finally:
        consumer.close()


def reader_alone(bootstrap: str, topic: str, count: int) -> float:
    """pipeline/fast_read.py without Spark: one partition's records into Arrow batches."""
    from pipeline.config import ReadConfig
    from pipeline.fast_read import read_batches
    from pipeline.planning import OffsetRange

    config = ReadConfig.from_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
    started = time.perf_counter()
    got = sum(batch.num_rows for batch in read_batches(config, OffsetRange(topic, 0, 0, count)))
    if got != count:
        raise RuntimeError(f"the reader returned {got} of {count} records")
    return time.perf_counter() - started


def librdkafka_one_partition(bootstrap: str, topic: str, count: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-pipeline", **CONSUMER_DEFAULTS})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        started, got = time.perf_counter(), 0
        while got < count:
            got += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
        return time.perf_counter() - started
    finally:
        consumer.close()


def rows_to_write(spark, count: int):
    """`count` rows of 100-200 byte values built by Spark itself, cached in the JVM's memory before any
    write is timed, as the librdkafka producer's values are built before its time starts."""
    df = spark.range(count, numPartitions=2).selectExpr(
        f"cast(id % {PARTITIONS} as int) as partition",
        "concat(cast(id as string), ',', repeat('x', 100 + cast(id % 100 as int))) as value").cache()
    df.count()
    return df


def spark_write(df, bootstrap: str, topic: str, source: str = "ebb") -> float:
    started = time.perf_counter()
    (df.write.format(source).mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .save())
    return time.perf_counter() - started


def spark_read(spark, bootstrap: str, topic: str, count: int, source: str = "ebb") -> float:
    started = time.perf_counter()
    (spark.read.format(source).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
     .write.format("noop").mode("append").save())
    return time.perf_counter() - started


def warm_up(spark, bootstrap: str, sources: tuple[str, ...]) -> None:
    """Each Spark source writes WARM_RECORDS into one topic; then each Spark source and the librdkafka
    consumer read all of it, in turn, until each has read WARM_ROWS; then the writers' rounds (WRITE_ROUNDS)."""
    create_topic(bootstrap, "bench-pipeline-warm", PARTITIONS)
    rows = rows_to_write(spark, WARM_RECORDS)
    for source in sources:
        spark_write(rows, bootstrap, "bench-pipeline-warm", source)
    count = len(sources) * WARM_RECORDS
    for _ in range(-(-WARM_ROWS // count)):
        for source in sources:
            spark_read(spark, bootstrap, "bench-pipeline-warm", count, source)
        librdkafka_consume(bootstrap, "bench-pipeline-warm", count)
    create_topic(bootstrap, "bench-pipeline-warm-writes", PARTITIONS)
    values = [b"x" * (100 + i % 100) for i in range(WARM_RECORDS)]
    rates: dict[str, list[float]] = {source: [] for source in sources}
    for _ in range(WRITE_ROUNDS):
        for source in sources:
            rates[source].append(WARM_RECORDS / spark_write(rows, bootstrap, "bench-pipeline-warm-writes", source))
        librdkafka_produce(bootstrap, "bench-pipeline-warm-writes", values)
        print("  warm-up writes, rows/s: " + ", ".join(f"{source} {rates[source][-1]:,.0f}" for source in sources),
              flush=True)
        if all(len(r) >= 2 and abs(r[-1] - r[-2]) <= WRITES_AGREE * max(r[-2:]) for r in rates.values()):
            break
    rows.unpersist()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200,000 records, one repetition")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.reps = 200_000, 1
    from pipeline.session import local_session

    rng = random.Random(16)
    values = [b"x" * rng.randint(100, 200) for _ in range(args.records)]
    rates: dict[str, list[float]] = {f"{who} {what}": [] for who in ("ebb", "kafka", "librdkafka")
                                     for what in ("write", "read")}
    rates.update({"ebb reader": [], "librdkafka reader": []})
    try:
        jars = connector_conf()
    except FileNotFoundError as exc:
        raise SystemExit(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as root, Ebb(Path(root)) as broker:
        bootstrap = broker.bootstrap
        spark = local_session("bench-pipeline", conf=jars, long_running=True)
        try:
            warm_up(spark, bootstrap, ("ebb", "kafka"))
            rows = rows_to_write(spark, args.records)
            for rep in range(args.reps):
                ours, connector, theirs = f"bench-ebb-{rep}", f"bench-connector-{rep}", f"bench-rdkafka-{rep}"
                for topic in (ours, connector, theirs):
                    create_topic(bootstrap, topic, PARTITIONS)
                rates["ebb write"].append(args.records / spark_write(rows, bootstrap, ours))
                rates["kafka write"].append(args.records / spark_write(rows, bootstrap, connector, "kafka"))
                rates["librdkafka write"].append(args.records / librdkafka_produce(bootstrap, theirs, values))
                rates["ebb read"].append(args.records / spark_read(spark, bootstrap, theirs, args.records))
                rates["kafka read"].append(args.records / spark_read(spark, bootstrap, theirs, args.records, "kafka"))
                rates["librdkafka read"].append(args.records / librdkafka_consume(bootstrap, theirs, args.records))
                one = args.records // PARTITIONS  # librdkafka_produce spreads the records evenly
                rates["ebb reader"].append(one / reader_alone(bootstrap, theirs, one))
                rates["librdkafka reader"].append(one / librdkafka_one_partition(bootstrap, theirs, one))
        finally:
            spark.stop()
    import confluent_kafka
    import pyspark

    print(f"{os.cpu_count()} cpus, Python {sys.version.split()[0]}, PySpark {pyspark.__version__} local[2], "
          f"confluent-kafka {confluent_kafka.__version__} / librdkafka {confluent_kafka.libversion()[0]}")
    print(f"{args.records} records of 100-200 B, {PARTITIONS} partitions, median of {args.reps}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end (the machine is shared)")
    for what in ("write", "read"):
        ebb, kafka, rdkafka = (statistics.median(rates[f"{who} {what}"]) for who in ("ebb", "kafka", "librdkafka"))
        print(f"format('ebb') {what:<6} {ebb:>9,.0f} rec/s   format('kafka') {kafka:>9,.0f} rec/s   "
              f"librdkafka {rdkafka:>9,.0f} rec/s   ebb/kafka {ebb / kafka:.2f}   ebb/librdkafka {ebb / rdkafka:.2f}")
        # each repetition runs the three one after another: its own ratio, and their spread
        ratios = [e / r for e, r in zip(rates[f"ebb {what}"], rates[f"librdkafka {what}"], strict=True)]
        print(f"  per repetition: ebb {_spread(rates[f'ebb {what}'])}, librdkafka "
              f"{_spread(rates[f'librdkafka {what}'])}, ebb/librdkafka {' '.join(f'{x:.2f}' for x in ratios)}")
    ebb, rdkafka = (statistics.median(rates[f"{who} reader"]) for who in ("ebb", "librdkafka"))
    print(f"one partition, no Spark: pipeline/fast_read.py {ebb:>9,.0f} rec/s   bare consume() {rdkafka:>9,.0f} rec/s"
          f"   ratio {ebb / rdkafka:.2f}")


def _spread(values: list[float]) -> str:
    return f"{min(values):,.0f}-{max(values):,.0f}"


if __name__ == "__main__":
    main()
