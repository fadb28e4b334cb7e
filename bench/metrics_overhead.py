"""What a Prometheus scrape every second costs produce throughput:
`python -m bench.metrics_overhead [--quick] [--reps N] [--dir PATH]`.

One Ebb broker with `ebb.metrics.listener` set. Each repetition produces 1 KiB records (acks=1,
confluent-kafka as in bench/produce.py, in rounds of 100,000) to a new topic for at least 10 s
(5 s with --quick), twice: once with nobody scraping and once with a scraper thread fetching
/metrics every second (order flipped every repetition). Retention keeps the disk bounded
(log.retention.bytes 256 MiB in 64 MiB segments, checked every second), the same in both runs.
The scraper is a separate process. Prints the medians of MB/s, the broker's CPU-seconds per GB and
Produce requests per GB (how the client batched) side by side with the change in percent, the
median time of one scrape under load, and what one scrape costs the idle broker in CPU.
Then, on a broker with 10,000 partitions (2,000 with --quick; --latency-only runs just this):
ApiVersions round trips every 2 ms without and with back-to-back scrapes, to show how long a scrape
holds requests up. The client, the scraper and the broker share the machine's cores; on a busy machine the noise
between repetitions can exceed the effect.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.peers import Ebb, create_topic, repetitions, run_arguments
from bench.produce import produce_load
from tests.support.broker_process import free_port
from tests.support.metrics_scrape import scrape, value

KiB = 1024
SCRAPE_INTERVAL_S = 1.0
ROUND = 100_000  # records per produce_load call
IDLE_SCRAPES = 100
BOUNDED_DISK = {"log.retention.bytes": str(256 * 1024 * 1024), "log.segment.bytes": str(64 * 1024 * 1024),
                "log.retention.check.interval.ms": "1000"}


# The scraper runs in a process of its own, as Prometheus would: in the producing process it would
# compete with the client for the GIL and change how the client batches.
_SCRAPE_LOOP = """
import sys, time, urllib.request
while True:
    started = time.perf_counter()
    with urllib.request.urlopen(sys.argv[1], timeout=10) as answer:
        answer.read()
    print(time.perf_counter() - started, flush=True)
    time.sleep(float(sys.argv[2]))
"""


class Scraper:
    """GET /metrics every second until stopped; keeps each scrape's duration."""

    def __init__(self, url: str, interval_s: float = SCRAPE_INTERVAL_S) -> None:
        self.url = url
        self.interval_s = interval_s
        self.durations: list[float] = []
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _SCRAPE_LOOP, self.url, str(self.interval_s)],
                                        stdout=subprocess.PIPE, text=True)

    def stop(self) -> None:
        assert self.process is not None
        self.process.terminate()
        output, _ = self.process.communicate()
        self.durations = [float(line) for line in output.split()]


def produce_requests(url: str) -> float:
    """Produce requests the broker has served so far (from its own metrics)."""
    return value(scrape(url), "kafka_network_requestmetrics_requests_total", request="Produce") or 0.0


def request_latency_during_scrapes(root: Path, partitions: int, seconds: float) -> None:
    """A broker with `partitions` partitions: ApiVersions round trips every 2 ms for `seconds`, first
    with nobody scraping, then with a scraper asking again as soon as each scrape ends (the worst
    case); the tail of those round trips is how long a scrape holds requests up."""
    from protocol.messages import ApiVersionsRequest, CreateTopicsRequest
    from tests.broker.data_wire import WireClient

    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    with Ebb(root, {"ebb.metrics.listener": f"http://127.0.0.1:{port}"}) as ebb, \
            WireClient(ebb.port, timeout=300) as client:
        for first in range(0, partitions, 1000):
            topic = CreateTopicsRequest.CreatableTopic(name=f"wide-{first}", replication_factor=1,
                                                       num_partitions=min(1000, partitions - first))
            client.send(CreateTopicsRequest(topics=[topic], timeout_ms=300_000), 7)
        size = len(urllib.request.urlopen(url, timeout=60).read())
        print(f"\nApiVersions round trips (ms) on a broker with {partitions:,} partitions, a scrape "
              f"{size / 1e6:.1f} MB:")
        print(f"{'':>22} {'p50':>6} {'p99':>6} {'max':>7} {'scrapes':>8} {'scrape s':>9}")
        for label, scraping in (("nobody scraping", False), ("back-to-back scrapes", True)):
            latencies, durations = [], []
            scraper = Scraper(url, interval_s=0) if scraping else None
            if scraper is not None:
                scraper.start()
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                client.send(ApiVersionsRequest(), 0)
                latencies.append(time.perf_counter() - started)
                time.sleep(0.002)
            if scraper is not None:
                scraper.stop()
                durations = scraper.durations
            latencies.sort()
            print(f"{label:>22} {latencies[len(latencies) // 2] * 1000:>6.2f} "
                  f"{latencies[int(len(latencies) * 0.99)] * 1000:>6.1f} {latencies[-1] * 1000:>7.1f} "
                  f"{len(durations):>8} {statistics.median(durations) if durations else float('nan'):>9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(parser, "shorter runs, 2,000 partitions instead of 10,000")
    parser.add_argument("--latency-only", action="store_true", help="only the request latency during scrapes")
    args = parser.parse_args()
    if args.latency_only:
        root = Path(tempfile.mkdtemp(prefix="ebb-bench-metrics-", dir=args.dir))
        try:
            request_latency_during_scrapes(root, 2000 if args.quick else 10_000, 5.0 if args.quick else 10.0)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    reps = repetitions(args)
    run_seconds = 5.0 if args.quick else 10.0
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-metrics-", dir=args.dir))
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    print(f"Produce throughput with and without a 1 s Prometheus scrape; {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    print(f"1 KiB records, 1 partition, acks=1, >= {run_seconds:.0f} s a run; medians of {reps} repetitions, "
          "alternating")
    results: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}  # the broker's CPU-seconds per GB produced
    requests: dict[bool, list[float]] = {False: [], True: []}  # Produce requests per GB: the client's batching
    scrape_times: list[float] = []
    try:
        with Ebb(root, {"ebb.metrics.listener": f"http://127.0.0.1:{port}", **BOUNDED_DISK}) as ebb:
            for rep in range(reps):
                for scraped in ((False, True) if rep % 2 == 0 else (True, False)):
                    topic = f"bench-{rep}-{'scraped' if scraped else 'quiet'}"
                    create_topic(ebb.bootstrap, topic, 1)
                    scraper = Scraper(url) if scraped else None
                    if scraper is not None:
                        scraper.start()
                    seconds = produced = 0
                    cpu_before, requests_before = ebb.cpu_seconds(), produce_requests(url)
                    while seconds < run_seconds:
                        seconds += produce_load(ebb.bootstrap, topic, 1, ROUND, KiB)
                        produced += ROUND
                    if scraper is not None:
                        scraper.stop()
                        scrape_times += scraper.durations
                    results[scraped].append(produced * KiB / seconds / 1e6)
                    cpu[scraped].append((ebb.cpu_seconds() - cpu_before) / (produced * KiB / 1e9))
                    requests[scraped].append((produce_requests(url) - requests_before) / (produced * KiB / 1e9))
            # What one scrape costs the broker, measured without load: CPU-seconds over many scrapes.
            cpu_before = ebb.cpu_seconds()
            for _ in range(IDLE_SCRAPES):
                with urllib.request.urlopen(url, timeout=10) as answer:
                    size = len(answer.read())
            scrape_cpu = (ebb.cpu_seconds() - cpu_before) / IDLE_SCRAPES
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'':>12} {'no scraper':>11} {'1 s scraper':>12} {'change':>8}")
    for label, samples, form in (("MB/s", results, ".1f"), ("CPU-s/GB", cpu, ".2f"), ("requests/GB", requests, ",.0f")):
        quiet, scraped = statistics.median(samples[False]), statistics.median(samples[True])
        print(f"{label:>12} {quiet:>11{form}} {scraped:>12{form}} {(scraped - quiet) / quiet:>+8.1%}")
    median_ms = statistics.median(scrape_times) * 1000 if scrape_times else float("nan")
    print(f"{len(scrape_times)} scrapes under load, median {median_ms:.1f} ms from request to last byte")
    print(f"one scrape ({size:,} bytes) costs the idle broker {scrape_cpu * 1000:.2f} ms of CPU: at one a second, "
          f"{scrape_cpu:.2%} of a core")
    print("each repetition, MB/s without/with: " + ", ".join(
        f"{q:.0f}/{s:.0f}" for q, s in zip(results[False], results[True], strict=True)))
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-metrics-", dir=args.dir))
    try:
        request_latency_during_scrapes(root, 2000 if args.quick else 10_000, 5.0 if args.quick else 10.0)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
