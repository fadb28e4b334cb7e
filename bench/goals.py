"""Ebb against a warm Apache Kafka with load generators that are not the limit (issue 33):
`python -m bench.goals [--quick] [--reps N] [--loads rdkafka,java] [--dir PATH] [--pause-damon]`.

Two loads, each run against both brokers:
- rdkafka: bench/rdkafka_load.c, a few lines of C on librdkafka (`make bench` builds it into
  .venv/bin/rdkafka_load against Debian's librdkafka-dev). Producer: librdkafka's defaults (linger.ms
  5, batches up to 1 MB), values not copied; consumer: every partition assigned from offset 0.
- java: Kafka's `kafka-producer-perf-test` / `kafka-consumer-perf-test` classes from the 4.3.1 jars
  (ProducerPerformance, ConsumerPerformance) with the Java clients' defaults (16 KiB batches); the
  consumer subscribes in a group, and its fetch-phase MB/s is taken (the join is left out).

Both brokers are started once (bench/peers.py: Ebb, and Kafka 4.3.1 as one KRaft node with its start
script's JVM settings, both persisting to a temporary directory on disk), then warmed with the load
until the produce figure of two rounds in a row agrees within 15% (at most 6 rounds). Each repetition
runs every case (1 and 6 partitions, acks=1 and acks=all; acks=all is idempotent) on both brokers, the
order swapped every repetition: a new topic, the page cache dropped (root only), produce RECORDS of
1 KiB, read them back while cached, delete the topic. Per case it prints the medians of produce and
consume MB/s (10^6 bytes of values per second) and of the broker's CPU-seconds (user + system, every
thread, /proc/<pid>/stat) per 10^9 bytes with its user and system parts apart (utime, stime), and
Ebb's ratio to Kafka as the median of the per-repetition ratios with their min-max (the spread).

End to end (`--loads` latency, on by default): Kafka's EndToEndLatency tool (`kafka-e2e-latency.sh`,
Java producer and consumer, the consumer in fetch sessions) sends LATENCY_RECORDS records of 1 KiB one
at a time to a new 1-partition topic, each consumed before the next is sent, with acks=1 and acks=all;
per case the medians over repetitions of its p50/p99/p99.9 (whole ms) and Ebb's p99 ratio to Kafka's
(< 1: Ebb faster).

The kernel's DAMON proactive reclaim (bench/damon.py) evicts the page cache under a run where it is on:
then each case's figures have the bytes it paged out beside them (the whole machine's, during that
broker's steps: medians over repetitions), and `--pause-damon` turns the kdamonds off for the run and
back on after it (root).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import perf_tools
from bench.damon import Damon
from bench.peers import (
    Ebb,
    Kafka,
    create_topic,
    drop_page_cache,
    kafka_version,
    repetitions,
    run_arguments,
    warm_up,
)

KiB = 1024
CASES = ((1, "1"), (1, "all"), (6, "1"), (6, "all"))
LOADS = ("rdkafka", "java", "latency")
RDKAFKA_LOAD = Path(sys.executable).parent / "rdkafka_load"
_RESULT = re.compile(r"records=(\d+) bytes=(\d+) seconds=([\d.]+)")


def _run(command: list[str], what: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def _acks_props(acks: str) -> list[str]:
    return [f"acks={acks}", f"enable.idempotence={'true' if acks == 'all' else 'false'}"]


def rdkafka_produce(bootstrap: str, topic: str, partitions: int, records: int, acks: str) -> float:
    out = _run([str(RDKAFKA_LOAD), "produce", bootstrap, topic, str(partitions), str(records), str(KiB),
                *_acks_props(acks)], "rdkafka_load produce")
    found = _RESULT.search(out)
    assert found is not None, out
    return int(found.group(2)) / float(found.group(3)) / 1e6


def rdkafka_consume(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    out = _run([str(RDKAFKA_LOAD), "consume", bootstrap, topic, str(partitions), str(records)],
               "rdkafka_load consume")
    found = _RESULT.search(out)
    assert found is not None, out
    return int(found.group(2)) / float(found.group(3)) / 1e6


def java_produce(bootstrap: str, topic: str, partitions: int, records: int, acks: str) -> float:
    return perf_tools.producer_perf(bootstrap, topic, records, KiB, tuple(_acks_props(acks)))[1]


def java_consume(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    return perf_tools.consumer_perf(bootstrap, topic, records)[1]


TOOLS = {"rdkafka": (rdkafka_produce, rdkafka_consume), "java": (java_produce, java_consume)}


def latency_runs(runner: Runner, brokers: list, records: int, reps: int) -> dict:
    """{(acks, broker name): [(p50, p99, p99.9, bytes paged out or None) per repetition]}, the brokers'
    order swapped each time."""
    results: dict = {}
    for rep in range(reps):
        for acks in ("1", "all"):
            for broker in (brokers if rep % 2 == 0 else brokers[::-1]):
                runner.serial += 1
                topic = f"goals-latency-{acks}-{runner.serial}"
                create_topic(broker.bootstrap, topic, 1)
                pageout = runner.pageout()
                got = perf_tools.end_to_end_latency(broker.bootstrap, topic, records, acks)
                results.setdefault((acks, broker.name), []).append((*got, _since(pageout, runner.pageout())))
                delete_topic(broker.bootstrap, topic)
    return results


def report_latency(results: dict, records: int, reps: int, pageouts: bool) -> None:
    print(f"\nend to end (EndToEndLatency, {records} records one at a time, 1 partition): medians of {reps} "
          f"repetitions in ms; p99 ratio = Ebb ÷ Kafka per repetition, median (min-max)")
    print(f"  {'case':<10} {'Ebb p50/p99/p99.9':>18} {'Kafka p50/p99/p99.9':>20} {'p99 ratio':>20}"
          + (f" {PAGEOUT_HEAD:>20}" if pageouts else ""))
    for acks in ("1", "all"):
        e, k = results[(acks, "ebb")], results[(acks, "kafka")]
        medians = ["/".join(f"{statistics.median(r[i] for r in runs):g}" for i in range(3)) for runs in (e, k)]
        ratios = [a[1] / max(b[1], 1) for a, b in zip(e, k, strict=True)]
        print(f"  {f'acks={acks}':<10} {medians[0]:>18} {medians[1]:>20} {spread(ratios):>20}"
              + (f" {_pageout_mb(e, k, 3):>20}" if pageouts else ""), flush=True)


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(timeout=60)


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _since(before: int | None, after: int | None) -> int | None:
    return None if before is None or after is None else after - before


PAGEOUT_HEAD = "DAMON pageout MB E/K"


def _pageout_mb(ebb: list[tuple], kafka: list[tuple], at: int) -> str:
    """The medians of the bytes DAMON paged out during Ebb's and Kafka's runs (field `at`), in MB."""
    medians = []
    for runs in (ebb, kafka):
        known = [r[at] for r in runs if r[at] is not None]
        medians.append(f"{statistics.median(known) / 1e6:.0f}" if known else "?")
    return " / ".join(medians)


class Runner:
    def __init__(self, records: dict[str, int], damon: Damon | None = None) -> None:
        self.records = records
        self.serial = 0
        self.damon = damon  # running DAMON whose pageouts each run counts; None when off, paused or absent

    def pageout(self) -> int | None:
        """Bytes DAMON has paged out so far (None without a DAMON to ask)."""
        return None if self.damon is None else self.damon.pageout_bytes()

    def one(self, broker, load: str, partitions: int, acks: str) -> dict[str, tuple]:
        """{"produce": (MB/s, broker CPU-s/GB, client CPU-s/GB, broker user, broker system CPU-s/GB,
        bytes DAMON paged out meanwhile or None), "consume": (...)} of one run on a new topic."""
        produce, consume = TOOLS[load]
        records = self.records[load]
        self.serial += 1
        topic = f"goals-{load}-{partitions}-{acks}-{self.serial}"
        create_topic(broker.bootstrap, topic, partitions)
        drop_page_cache()
        gb = records * KiB / 1e9
        out = {}
        for step, call in (("produce", lambda: produce(broker.bootstrap, topic, partitions, records, acks)),
                           ("consume", lambda: consume(broker.bootstrap, topic, partitions, records))):
            (user, system), client, pageout = broker.cpu_split(), _children_cpu(), self.pageout()
            mb_s = call()
            user_after, system_after = broker.cpu_split()
            user, system = (user_after - user) / gb, (system_after - system) / gb
            out[step] = (mb_s, user + system, (_children_cpu() - client) / gb, user, system,
                         _since(pageout, self.pageout()))
        delete_topic(broker.bootstrap, topic)
        return out


def warm(runner: Runner, brokers: list, load: str) -> None:
    """Rounds of the 6-partition acks=1 case until two produce figures in a row agree within 15%."""
    for broker in brokers:
        figures: list[float] = []
        for _ in range(6):
            got = runner.one(broker, load, 6, "1")
            figures.append(got["produce"][0])
            print(f"  warm-up {load} on {broker.name}: produce {got['produce'][0]:.0f} MB/s, "
                  f"consume {got['consume'][0]:.0f} MB/s", flush=True)
            if len(figures) >= 2 and abs(figures[-1] - figures[-2]) <= 0.15 * max(figures[-2:]):
                break


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}× ({min(values):.2f}-{max(values):.2f})"


def report(load: str, results: dict, reps: int, pageouts: bool) -> None:
    print(f"\n{load}: medians of {reps} repetitions; ratio = Ebb ÷ Kafka per repetition, median (min-max)")
    head = (f"  {'case':<16} {'step':<8} {'Ebb MB/s':>9} {'Kafka':>7} {'MB/s ratio':>20}"
            f" {'Ebb CPU-s/GB':>13} {'Kafka':>7} {'CPU-s/GB ratio':>20} {'client CPU-s/GB E/K':>20}"
            f" {'Ebb user/sys':>13} {'Kafka user/sys':>15}" + (f" {PAGEOUT_HEAD:>20}" if pageouts else ""))
    print(head)
    for partitions, acks in CASES:
        for step in ("produce", "consume"):
            runs = results[(partitions, acks)]
            e = [r[step] for r in runs["ebb"]]
            k = [r[step] for r in runs["kafka"]]
            mb = [a[0] / b[0] for a, b in zip(e, k, strict=True)]
            cpu = [a[1] / b[1] for a, b in zip(e, k, strict=True)]
            print(f"  {f'{partitions} part, acks={acks}':<16} {step:<8} {statistics.median(a[0] for a in e):>9.0f}"
                  f" {statistics.median(b[0] for b in k):>7.0f} {spread(mb):>20}"
                  f" {statistics.median(a[1] for a in e):>13.2f} {statistics.median(b[1] for b in k):>7.2f}"
                  f" {spread(cpu):>20}"
                  f" {statistics.median(a[2] for a in e):>9.2f} /{statistics.median(b[2] for b in k):>5.2f}"
                  f" {_user_system(e):>13} {_user_system(k):>15}"
                  + (f" {_pageout_mb(e, k, 5):>20}" if pageouts else ""), flush=True)


def _user_system(runs: list[tuple[float, ...]]) -> str:
    """The broker's user and system CPU-s/GB, medians: where its CPU goes (the kernel's sendfile and TCP
    work on a consume, the process's own work in user time)."""
    return f"{statistics.median(r[3] for r in runs):.2f}/{statistics.median(r[4] for r in runs):.2f}"


def overrides_text(ebb_overrides: list[str]) -> str:
    """What `ebb.socket.loopback.congestion.control` is for this run's Ebb ("" keeps the system's)."""
    from broker.loopback_tcp import DEFAULT, PROPERTY

    chosen = dict(item.split("=", 1) for item in ebb_overrides).get(PROPERTY, DEFAULT)
    return chosen or "the system's"


def damon_note(damon: Damon, pause: bool, counted: bool) -> str | None:
    """What a run says of DAMON before it starts (a pause says itself what it turned off)."""
    if damon.kdamonds and not pause:
        return (f"DAMON proactive reclaim is on (kdamond {damon.names}): the page cache is being evicted under the "
                f"run; " + ("each case's pageout beside its figures" if counted else "its pageouts cannot be counted"
                            " (its stats need root)") + "; --pause-damon turns it off for the run")
    if not damon.kdamonds and damon.unreadable:  # mode 0600: a user other than root sees no state
        return (f"DAMON: the state of kdamond {', '.join(k.name for k in damon.unreadable)} cannot be read "
                "(not root): whether it evicts the page cache under the run is unknown"
                + ("; --pause-damon pauses nothing" if pause else ""))
    if pause and not damon.kdamonds:
        return "--pause-damon: no DAMON kdamond with a pageout scheme is running, nothing to pause"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(parser, "fewer records and repetitions")
    parser.add_argument("--loads", default=",".join(LOADS), help="comma-separated: rdkafka, java, latency")
    parser.add_argument("--ebb-override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker property for Ebb (repeatable), e.g. max.incremental.fetch.session.cache.slots=0 "
                             "for sessionless fetches")
    parser.add_argument("--pause-damon", action="store_true",
                        help="turn the kernel's DAMON proactive reclaim (its running kdamonds) off for the run and "
                             "back on after it, also on a failure or an interrupt (root)")
    args = parser.parse_args()
    loads = [name for name in args.loads.split(",") if name]
    for name in loads:
        if name not in LOADS:
            sys.exit(f"unknown load {name!r}: one of {', '.join(LOADS)}")
    if "rdkafka" in loads and not os.access(RDKAFKA_LOAD, os.X_OK):
        sys.exit(f"no {RDKAFKA_LOAD}: `make bench` builds it (needs librdkafka-dev)")
    reps = repetitions(args)
    records = {"rdkafka": 300_000, "java": 200_000} if args.quick else {"rdkafka": 1_000_000, "java": 500_000}
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-goals-", dir=args.dir))
    load_average = os.getloadavg()[0]
    print(f"Ebb and {kafka_version()} on disk ({root}), {os.cpu_count()} cpus, load average {load_average:.1f} at "
          f"the start; records of 1 KiB per run: {records}; Ebb overrides: {args.ebb_override or 'none'}")
    # Consume figures depend on it: BBR paces loopback sends (docs/performance.md, Findings: six-partition anomaly)
    congestion = Path("/proc/sys/net/ipv4/tcp_congestion_control")
    print(f"TCP congestion control: {congestion.read_text().strip() if congestion.exists() else '?'} (Kafka); "
          f"Ebb's loopback connections: {overrides_text(args.ebb_override)}")
    print("the page cache is dropped before each run" if drop_page_cache() else
          "the page cache is NOT dropped before each run (needs root)")
    damon = Damon.find()
    counted = damon if damon.kdamonds and not args.pause_damon and damon.pageout_bytes() is not None else None
    note = damon_note(damon, args.pause_damon, counted is not None)
    if note:
        print(note)
    runner = Runner(records, counted)
    pageout_at_start = runner.pageout()
    started = time.monotonic()
    try:
        overrides = dict(item.split("=", 1) for item in args.ebb_override)
        with (damon.paused() if args.pause_damon else contextlib.nullcontext(),
              Ebb(root, overrides) as ebb, Kafka(root) as kafka):
            for broker in (ebb, kafka):
                warm_up(broker.bootstrap)
            for load in loads:
                if load == "latency":
                    latency_records = 2_000 if args.quick else 10_000
                    report_latency(latency_runs(runner, [ebb, kafka], latency_records, reps), latency_records, reps,
                                   counted is not None)
                    continue
                warm(runner, [ebb, kafka], load)
                results: dict = {case: {"ebb": [], "kafka": []} for case in CASES}
                for rep in range(reps):
                    for partitions, acks in CASES:
                        for broker in ([ebb, kafka] if rep % 2 == 0 else [kafka, ebb]):
                            results[(partitions, acks)][broker.name].append(
                                runner.one(broker, load, partitions, acks))
                report(load, results, reps, counted is not None)
    except BaseException:
        _keep_logs(root)
        raise
    finally:
        shutil.rmtree(root, ignore_errors=True)
    paged_out = _since(pageout_at_start, runner.pageout())
    print(f"\n{time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.1f} at the end"
          + (f"; DAMON paged out {paged_out / 1e6:.0f} MB during the run" if paged_out is not None else ""))


def _keep_logs(root: Path) -> None:
    """A failed run's broker logs outlive the data directory removed after it: they say why a broker went."""
    kept = Path(tempfile.mkdtemp(prefix="ebb-bench-goals-logs-"))
    for name in ("broker.log", "kafka.log"):  # Ebb's and Kafka's (bench/peers.py), not their segments
        for log_file in root.rglob(name):
            shutil.copy(log_file, kept / f"{log_file.parent.name}-{log_file.name}")
    print(f"the brokers' logs of this failed run are kept in {kept}", file=sys.stderr)


if __name__ == "__main__":
    main()
