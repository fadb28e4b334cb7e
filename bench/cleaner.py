"""Log cleaner benchmark: `python -m bench.cleaner [--quick] [--dir PATH]`.

Prints, in one run:
  1. cleaner throughput: one round over a compacted log of keyed 1 KiB records (16 a batch, one key in
     ten kept), in MiB of log cleaned per second (of wall clock, and of the cleaner process's CPU),
     next to a plain copy of the same segment files on the same disk (page cache), and Apache Kafka's
     cleaner on the same batches and segment size (its jars from `make tests/interop/java/target/.built`;
     timed from the config change that makes the log cleanable to its cleaner-offset-checkpoint);
  2. append throughput to a compacted log while a cleaning round of another log runs in a cleaner
     process (as the broker runs it), and in a thread of the broker's process (the interpreter lock
     shared with the event loop: why the broker does not), next to the same appends with no round.
  3. produce throughput over the wire to one broker process: 1 KiB records over 1,000 keys from
     bench/rdkafka_load.c (librdkafka, acks=1, `make bench` builds it) into a one-partition topic with
     1 MiB segments: cleanup.policy=delete, cleanup.policy=compact on a broker with
     log.cleaner.enable=false (the cost of checking keys alone), and cleanup.policy=compact with
     min.cleanable.dirty.ratio=0.01 and log.cleaner.backoff.ms=100. Each topic is first filled with
     part 1's bytes (untimed; on the compacted one until the cleaner's first round is done), then
     the same bytes again are timed while the cleaner rounds (its checkpoint before and after, and
     the share of the timed run during which a round ran, from the broker log, are printed);
     three runs on fresh brokers, medians.

--quick scales the sizes down and says so. Files go to a temporary directory under --dir.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import structlog

from bench.goals import RDKAFKA_LOAD
from bench.peers import Ebb, Kafka, kafka_version
from broker.log import LogConfig, LogManager, LogManagerConfig, TopicPartition
from client import Admin
from protocol.enums import ApiKey
from protocol.messages import ProduceRequest
from protocol.records import build_batch

MiB = 1024 * 1024
T0 = 1_700_000_000_000


def _quiet_logs() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def _row(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<56} {value:>14}  {note}")


def _batches(total_mib: int, keys: int, rng: random.Random) -> list[bytes]:
    value = os.urandom(1000)
    count = total_mib * MiB // (16 * 1040)
    return [build_batch([(b"key-%d" % rng.randrange(keys), value, [], T0 + i) for _ in range(16)])
            for i in range(count)]


async def _filled(manager: LogManager, tp: TopicPartition, batches: list[bytes]):
    log = await manager.get_or_create_log(tp)
    for data in batches:
        await log.append(bytearray(data), leader_epoch=0)
    await log.append(bytearray(build_batch([(b"roll", b"x", [], T0)])), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    return log


async def run(root: Path, total_mib: int, round_only: bool = False) -> None:
    config = LogConfig(segment_bytes=max(total_mib // 8, 1) * MiB, retention_ms=-1, cleanup_policy=("compact",),
                       min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0)
    manager = LogManager(root / "logs", config=LogManagerConfig(io_threads=2), default_log_config=config)
    await manager.startup(background_tasks=False)
    process = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    process.submit(int).result()  # started before anything is timed
    rng = random.Random(1)
    records = total_mib * MiB // 1040
    batches = _batches(total_mib, max(records // 10, 1), rng)
    log = await _filled(manager, TopicPartition("bench", 0), batches)
    closed = log.segments[:-1]
    size = sum(s.size for s in closed)
    print(f"\n1. One cleaning round: {size / MiB:.0f} MiB in {len(closed)} closed segments, "
          f"{records:,} records of ~1 KiB over {max(records // 10, 1):,} keys")
    copy_dir = root / "copy"
    copy_dir.mkdir()
    start = time.perf_counter()
    for segment in closed:
        shutil.copyfile(segment.log_path, copy_dir / segment.log_path.name)
    copy_s = time.perf_counter() - start
    cpu_before = process.submit(time.process_time).result()
    start = time.perf_counter()
    assert await manager.cleaner.clean_filthiest(process)
    clean_s = time.perf_counter() - start
    cpu_s = process.submit(time.process_time).result() - cpu_before
    _row("plain copy of the segment files", f"{size / MiB / copy_s:,.0f} MiB/s")
    _row("cleaning round (map, copy what stays, swap)", f"{size / MiB / clean_s:,.1f} MiB/s",
         f"{clean_s / copy_s:,.0f}x the copy's time; "
         f"{sum(s.size for s in log.segments[:-1]) / MiB:.1f} MiB left")
    # CPU of the cleaner's process alone: on a shared machine the wall clock also counts waiting for a core
    _row("the same round per CPU second of the cleaner process", f"{size / MiB / cpu_s:,.1f} MiB/s",
         f"{cpu_s:.2f} s of CPU in {clean_s:.2f} s")

    await kafka_round(root, batches, config.segment_bytes)
    if round_only:
        process.shutdown()
        await manager.shutdown()
        return
    print("\n2. Appends of 1 MiB (64 batches): delete policy, compacted, compacted while a round runs")
    payload = bytearray(b"".join(_batches(1, 10_000, rng)))
    plain_config = replace(config, cleanup_policy=("delete",))
    target = await manager.get_or_create_log(TopicPartition("plain", 0), config=plain_config)

    async def append_for(seconds: float) -> float:
        appended, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            await target.append(bytearray(payload), leader_epoch=0)
            appended += len(payload)
            await asyncio.sleep(0)
        return appended / MiB / (time.perf_counter() - start)

    async def while_cleaning(worker) -> tuple[float, float]:
        await _filled(manager, TopicPartition("bench", next(partitions)), batches)
        cleaning = asyncio.ensure_future(manager.cleaner.clean_filthiest(worker))
        await asyncio.sleep(0)
        started, speeds = time.perf_counter(), []
        while not cleaning.done():
            speeds.append(await append_for(0.5))
        assert await cleaning
        return sum(speeds) / max(len(speeds), 1), time.perf_counter() - started

    partitions = iter(range(1, 100))
    plain = await append_for(2.0)
    target = await manager.get_or_create_log(TopicPartition("appends", 0))  # compacted: keys are checked
    idle = await append_for(2.0)
    in_process, process_s = await while_cleaning(process)
    in_thread, thread_s = await while_cleaning(None)
    _row("appends to a cleanup.policy=delete log", f"{plain:,.0f} MiB/s")
    _row("appends to a compacted log, no cleaning round", f"{idle:,.0f} MiB/s",
         f"{idle / plain:.2f}x (each record's key is checked)")
    _row("appends while a round runs in a cleaner process", f"{in_process:,.0f} MiB/s",
         f"{in_process / idle:.2f}x; the round took {process_s:.1f} s")
    _row("appends while a round runs in a thread (not used)", f"{in_thread:,.0f} MiB/s",
         f"{in_thread / idle:.2f}x; the round took {thread_s:.1f} s")
    process.shutdown()
    await manager.shutdown()


async def kafka_round(root: Path, batches: list[bytes], segment_bytes: int) -> None:
    """Apache Kafka's cleaner on the same batches and segment size, its log.cleaner.* settings at their
    defaults but log.cleaner.backoff.ms=100: the topic is filled with min.cleanable.dirty.ratio=1.0 (never
    cleanable), then set to 0.0; timed from that change until its cleaner-offset-checkpoint reaches the
    active segment (so up to one 100 ms backoff and 50 ms of polling are in the figure)."""
    kafka = Kafka(root)
    kafka.node.properties["log.cleaner.backoff.ms"] = "100"
    with kafka:
        took_s, cleaned_bytes, cpu_s = await _kafka_round(kafka, batches, segment_bytes)
    _row("Apache Kafka's cleaner, the same round", f"{cleaned_bytes / MiB / took_s:,.1f} MiB/s",
         f"{cleaned_bytes / MiB:.0f} MiB in {took_s:.2f} s (roll to checkpoint); "
         f"{cpu_s:.2f} s of the JVM's CPU meanwhile ({kafka_version()})")


async def _kafka_round(kafka: Kafka, batches: list[bytes], segment_bytes: int) -> tuple[float, int, float]:
    topic = "bench"
    async with Admin(kafka.bootstrap) as admin:
        await admin.create_topic(topic, configs={"cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
                                                 "min.cleanable.dirty.ratio": "1.0"})
        conn = await admin.cluster.connection(1)
        version = conn.pick_version(ApiKey.PRODUCE)
        for data in [*batches, build_batch([(b"roll", b"x", [], T0)])]:
            request = ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[ProduceRequest.TopicProduceData(
                name=topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                    index=0, records=data)])])
            answer = await conn.request(request, version=version)
            assert answer.responses[0].partition_responses[0].error_code == 0, answer
        log_dir = kafka.node.data_dir / "logs"
        segments = sorted((log_dir / f"{topic}-0").glob("*.log"))
        active = int(segments[-1].stem)
        cleaned_bytes = sum(path.stat().st_size for path in segments[:-1])
        cpu_before, started = kafka.cpu_seconds(), time.perf_counter()
        await admin.alter_configs(topic, {"min.cleanable.dirty.ratio": "0.0"})
        deadline = time.monotonic() + 600
        while _checkpoint_entry(log_dir / "cleaner-offset-checkpoint", topic) < active:
            assert time.monotonic() < deadline, "Kafka's cleaner did not reach the active segment in 600 s"
            await asyncio.sleep(0.05)
        return time.perf_counter() - started, cleaned_bytes, kafka.cpu_seconds() - cpu_before


def _checkpoint_entry(path: Path, topic: str) -> int:
    lines = path.read_text().splitlines()[2:] if path.exists() else []
    return next((int(offset) for name, _, offset in map(str.split, lines) if name == topic), 0)


PRODUCED = re.compile(r"records=(\d+) bytes=(\d+) seconds=([\d.]+)")
LOAD_KEYS = 1000
RUNS = 3


def _produce_mb_s(bootstrap: str, topic: str, records: int) -> float:
    done = subprocess.run([str(RDKAFKA_LOAD), "produce", bootstrap, topic, "1", str(records), "1024", "acks=1",
                           f"load.keys={LOAD_KEYS}"], capture_output=True, text=True, timeout=600)
    found = PRODUCED.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"rdkafka_load produce failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found.group(2)) / float(found.group(3)) / 1e6


def _checkpointed(broker: Ebb, topic: str) -> int:
    """The topic's first dirty offset in cleaner-offset-checkpoint: how far the cleaner has got (0: not yet)."""
    return _checkpoint_entry(broker.data_dir / "logs" / "cleaner-offset-checkpoint", topic)


def _cleaning_share(log: str, topic: str, window: tuple[float, float]) -> float:
    """The share of `window` (wall-clock seconds) during which a cleaning round of the topic ran,
    from the broker log's "cleaning log" and "cleaned log" events."""
    covered, started = 0.0, None
    for line in log.splitlines():
        if f'"{topic}-0"' not in line or '"cleaning log"' not in line and '"cleaned log"' not in line:
            continue
        event = json.loads(line)
        at = datetime.fromisoformat(event["timestamp"]).timestamp()
        if event["event"] == "cleaning log":
            started = at
        elif started is not None:
            covered += max(0.0, min(at, window[1]) - max(started, window[0]))
            started = None
    if started is not None:  # still running when the broker stopped
        covered += max(0.0, window[1] - max(started, window[0]))
    return covered / (window[1] - window[0])


def produce_while_cleaning(root: Path, records: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    if not RDKAFKA_LOAD.exists():
        raise SystemExit(f"{RDKAFKA_LOAD} is missing: `make .venv/bin/rdkafka_load` (make bench builds it)")
    print(f"\n3. Produce over the wire, {records:,} records of 1 KiB over {LOAD_KEYS:,} keys (rdkafka_load, acks=1), "
          "one partition, 1 MiB segments")
    segments = {"segment.bytes": str(MiB)}
    compact = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", **segments}
    # (label, topic configs, log.cleaner.enable of its broker)
    cases = [("delete", {"cleanup.policy": "delete", **segments}, False),
             ("compact, log.cleaner.enable=false", compact, False),
             ("compact, cleaner running", compact, True)]
    speeds: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    reached: list[tuple[int, int]] = []
    shares: list[float] = []
    for _ in range(RUNS):
        # fresh brokers each run; the cleaner's own broker holds only the topic it cleans
        for cleaner in (False, True):
            with Ebb(root, {"log.cleaner.backoff.ms": "100", "log.cleaner.enable": str(cleaner).lower()}) as broker:
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                for number, (label, configs, _) in enumerate(c for c in cases if c[2] == cleaner):
                    topic = f"t{number}"
                    for future in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
                        future.result(timeout=60)
                    _produce_mb_s(broker.bootstrap, topic, records)  # untimed: the log the cleaner works on
                    deadline = time.monotonic() + 120
                    while cleaner and not _checkpointed(broker, topic):  # its first round is done
                        assert time.monotonic() < deadline, "the cleaner did not finish a round in 120 s"
                        time.sleep(0.05)
                    before, started = _checkpointed(broker, topic), time.time()
                    speeds[label].append(_produce_mb_s(broker.bootstrap, topic, records))
                    window = (started, time.time())
                    if cleaner:
                        reached.append((before, _checkpointed(broker, topic)))
                del admin  # its connections closed before the broker stops: no disconnect noise from librdkafka
            if cleaner:  # the broker's log is complete once it has stopped
                shares.append(_cleaning_share(broker.log_path().read_text(errors="replace"), "t0", window))
    plain = statistics.median(speeds[cases[0][0]])
    for label, _, _ in cases:
        median = statistics.median(speeds[label])
        _row(f"produce, cleanup.policy={label}", f"{median:,.1f} MB/s",
             f"{median / plain:.2f}x; runs: " + ", ".join(f"{v:.1f}" for v in speeds[label]))
    _row("cleaner checkpoint before and after the timed run", "; ".join(f"{a:,}->{b:,}" for a, b in reached),
         f"log end {2 * records:,} (MB/s: 10^6 bytes of values)")
    _row("share of each timed run with a round of its topic running", ", ".join(f"{v:.0%}" for v in shares))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="32 MiB instead of 256 MiB")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--round-only", action="store_true", help="part 1 only (Ebb's round and Kafka's)")
    args = parser.parse_args()
    _quiet_logs()
    total = 32 if args.quick else 256
    if args.quick:
        print("--quick: 32 MiB of log instead of 256 MiB")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        asyncio.run(run(Path(tmp), total, args.round_only))
    if args.round_only:
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        produce_while_cleaning(Path(tmp), total * 1024)


if __name__ == "__main__":
    main()
