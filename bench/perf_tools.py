"""Kafka's own load tools against Ebb, Kafka and Tansu: `python -m bench.perf_tools [--quick] [--reps N] [--dir PATH]`.

The Python load client of bench.produce and bench.consume is one process of librdkafka driven from
Python; here the load comes from the JVM instead, with what `kafka-producer-perf-test.sh` and
`kafka-consumer-perf-test.sh` run (`org.apache.kafka.tools.ProducerPerformance` and
`ConsumerPerformance` from the pinned kafka-tools jar), with the Java clients' defaults (acks=all,
idempotent, linger.ms=5, batch.size=16384; the consumer in a group, subscribed). For each case (1 KiB
records, 1 and 6 partitions) the three brokers are started fresh (bench/peers.py); each repetition
produces the records to a new topic on each broker in turn (the order rotated every repetition) and
reads them back with the consumer tool. Prints the medians of the tools' own figures (the producer's
MB/s over the whole run; the consumer's fetch MB/s, which leaves out the group join) and of the
broker's CPU-seconds per GB, with Ebb's ratios to Kafka and to Tansu.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench.peers import (
    KAFKA_JARS,
    PEERS,
    Ebb,
    Kafka,
    Tansu,
    alternate,
    create_topic,
    drop_page_cache,
    machine_line,
    repetitions,
    run_arguments,
    throughput_header,
    throughput_row,
)

KiB = 1024
TOOL_JVM = ["-Xmx512m", "-XX:+UseG1GC"]  # what the perf-test scripts give a client JVM
_PRODUCED = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def _java(main: str, *args: str) -> list[str]:
    return ["java", *TOOL_JVM, "-cp", f"{KAFKA_JARS}/*", main, *args]


def _run(command: list[str], what: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def producer_perf(bootstrap: str, topic: str, records: int, record_size: int,
                  props: tuple[str, ...] = ()) -> tuple[float, float]:
    """(records/s, MB/s) as ProducerPerformance reports them for the whole run (its MB is 2^20 bytes);
    `props` are more producer settings (key=value)."""
    out = _run(_java("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(records),
                     "--record-size", str(record_size), "--throughput", "-1",
                     "--producer-props", f"bootstrap.servers={bootstrap}", *props), "ProducerPerformance")
    summary = [m for m in _PRODUCED.finditer(out)][-1]  # the last line is the whole run's
    if int(summary.group(1)) != records:
        raise RuntimeError(f"ProducerPerformance sent {summary.group(1)} of {records} records:\n{out[-2000:]}")
    return float(summary.group(2)), float(summary.group(3)) * 2**20 / 1e6


_LATENCY = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")


def end_to_end_latency(bootstrap: str, topic: str, records: int, acks: str, record_size: int = KiB) -> tuple[int, ...]:
    """(p50, p99, p99.9) in ms from Kafka's EndToEndLatency (`kafka-e2e-latency.sh`): one record at a time
    produced (linger.ms=0, waiting for its ack) and consumed by a Java consumer (fetch.max.wait.ms=0,
    fetch sessions) before the next; the latency is from send to receipt."""
    out = _run(_java("org.apache.kafka.tools.EndToEndLatency", bootstrap, topic, str(records), acks,
                     str(record_size)), "EndToEndLatency")
    found = _LATENCY.search(out)
    if found is None:
        raise RuntimeError(f"EndToEndLatency printed no percentiles:\n{out[-2000:]}")
    return tuple(int(v) for v in found.groups())


def consumer_perf(bootstrap: str, topic: str, records: int) -> tuple[float, float]:
    """(records/s, MB/s) of ConsumerPerformance's fetch phase (after the group join)."""
    out = _run(_java("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
                     "--messages", str(records), "--timeout", "60000"), "ConsumerPerformance")
    lines = [line for line in out.splitlines() if line.strip()]
    names = [n.strip() for n in lines[-2].split(",")]
    values = dict(zip(names, (v.strip() for v in lines[-1].split(",")), strict=True))
    if int(values["data.consumed.in.nMsg"]) < records:
        raise RuntimeError(f"ConsumerPerformance read {values['data.consumed.in.nMsg']} of {records} records")
    return float(values["fetch.nMsg.sec"]), float(values["fetch.MB.sec"]) * 2**20 / 1e6


def run_case(partitions: int, records: int, root: Path, reps: int) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Each repetition produces to a new topic on each broker, the page cache dropped first (when
    permitted: `drop_page_cache`), then reads the records back while they are still cached."""
    results = {tool: {name: {"mb_s": [], "rec_s": [], "cpu_gb": []} for name in PEERS} for tool in ("produce",
                                                                                                    "consume")}
    payload = records * KiB
    with Ebb(root) as ebb, Kafka(root) as kafka, Tansu(root) as tansu:
        for rep in range(reps):
            for broker in alternate([ebb, kafka, tansu], rep):
                topic = f"perf-{rep}"
                create_topic(broker.bootstrap, topic, partitions)
                drop_page_cache()
                for tool, run in (("produce", lambda b=broker, t=topic: producer_perf(b.bootstrap, t, records, KiB)),
                                  ("consume", lambda b=broker, t=topic: consumer_perf(b.bootstrap, t, records))):
                    before = broker.cpu_seconds()
                    rec_s, mb_s = run()
                    cpu = broker.cpu_seconds() - before
                    r = results[tool][broker.name]
                    r["mb_s"].append(mb_s)
                    r["rec_s"].append(rec_s)
                    r["cpu_gb"].append(cpu / (payload / 1e9))
    shutil.rmtree(ebb.data_dir, ignore_errors=True)
    shutil.rmtree(kafka.node.data_dir, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(parser, "fewer records and repetitions")
    args = parser.parse_args()
    reps = repetitions(args)
    records = 200_000 if args.quick else 1_000_000
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-perf-tools-", dir=args.dir))
    print(f"Kafka's perf-test tools (JVM clients), Ebb and Kafka (disk, {root}) beside Tansu (memory engine); "
          f"{machine_line()}")
    print(f"{records:,} records of 1 KiB per run; medians of {reps} repetitions per broker, rotating; broker CPU "
          "includes the group join for the consumer")
    print("the page cache is dropped before each produce run" if drop_page_cache() else
          "the page cache is NOT dropped before each produce run (needs root): later runs may pay to reclaim it")
    widths = throughput_header(28)
    try:
        for partitions in (1, 6):
            results = run_case(partitions, records, root, reps)
            for tool in ("produce", "consume"):
                throughput_row(f"{tool}, 1 KiB, {partitions} part", results[tool], widths)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
