"""Ten thousand partitions on one broker: `python -m bench.scale [--quick] [--dir PATH] [--partitions N]`.

Measured, on one Ebb broker process on disk:
  - CreateTopics of one topic with N partitions in one request; meanwhile a one-partition CreateTopics
    sent on another connection (how long topic administration holds up other requests);
  - CreatePartitions growing a second topic from 1 to N partitions in one request;
  - DeleteRecords over all N partitions of the first topic in one request (one record each);
  - restart after SIGTERM and after SIGKILL: spawn to a Metadata answer with every partition led;
  - open file descriptors of the broker process after each step (/proc/PID/fd).
Goals (issue 18): create ≤ 10 s, restart ≤ 15 s, DeleteRecords ≤ 2 s, descriptors bounded. Idle
segment files beyond `ebb.log.open.segments.max` (4096) are closed and opened again when used, so
descriptors stay near that budget whatever the partition count.

The same steps then run against Apache Kafka 4.3.1 (one KRaft node from the jars of
tests/interop/java, tests/support/kafka_node.py: 512 MiB heap, Kafka's defaults otherwise) and its
figures are printed beside Ebb's. Kafka's controller refuses more than 10,000 records in one request,
so an N-partition request it refuses is shown as its error. Tansu's memory engine keeps no partitions
on disk, so it does not appear here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import signal
import tempfile
import time
from pathlib import Path

from bench.peers import KAFKA_JARS, Ebb, machine_line
from client import Admin, BrokerConnection, Producer
from protocol.errors import ErrorCode
from protocol.messages import CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest, MetadataRequest
from tests.support.kafka_node import KafkaNode

BIG, GROWN = "scale-created", "scale-grown"


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def timed(coro) -> tuple[float, object]:
    start = time.monotonic()
    result = await coro
    return time.monotonic() - start, result


async def create_big_topic(port: int, partitions: int) -> tuple[float, float]:
    """(seconds for the N-partition CreateTopics, seconds a one-partition CreateTopics sent 50 ms later waited)."""
    big, small = BrokerConnection("127.0.0.1", port), BrokerConnection("127.0.0.1", port)
    await big.connect()
    await small.connect()
    Topic = CreateTopicsRequest.CreatableTopic
    try:
        creating = asyncio.ensure_future(timed(big.request(CreateTopicsRequest(
            topics=[Topic(name=BIG, num_partitions=partitions, replication_factor=1)], timeout_ms=600_000),
            version=7, timeout_s=900)))
        await asyncio.sleep(0.05)
        small_s, small_reply = await timed(small.request(CreateTopicsRequest(
            topics=[Topic(name="scale-small", num_partitions=1, replication_factor=1)], timeout_ms=600_000),
            version=7, timeout_s=900))
        big_s, big_reply = await creating
        _check(big_reply.topics[0].error_code, big_reply.topics[0].error_message)
        _check(small_reply.topics[0].error_code, small_reply.topics[0].error_message)
        return big_s, small_s
    finally:
        await big.close()
        await small.close()


async def grow_topic(bootstrap: str, port: int, partitions: int) -> float:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(GROWN, num_partitions=1)
    conn = BrokerConnection("127.0.0.1", port)
    await conn.connect()
    try:
        seconds, reply = await timed(conn.request(CreatePartitionsRequest(topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=GROWN, count=partitions, assignments=None)],
            timeout_ms=600_000, validate_only=False), version=3, timeout_s=900))
        _check(reply.results[0].error_code, reply.results[0].error_message)
        return seconds
    finally:
        await conn.close()


async def delete_everywhere(bootstrap: str, port: int, partitions: int) -> float:
    async with Admin(bootstrap) as admin:
        async with Producer(admin.cluster, acks=1) as producer:
            await producer.send_batches({(BIG, p): [b"x"] for p in range(partitions)})
    conn = BrokerConnection("127.0.0.1", port)
    await conn.connect()
    try:
        Topic = DeleteRecordsRequest.DeleteRecordsTopic
        request = DeleteRecordsRequest(timeout_ms=60_000, topics=[Topic(name=BIG, partitions=[
            Topic.DeleteRecordsPartition(partition_index=p, offset=1) for p in range(partitions)])])
        seconds, reply = await timed(conn.request(request, version=2, timeout_s=120))
        for error in {p.error_code for t in reply.topics for p in t.partitions}:
            _check(error, "DeleteRecords")
        return seconds
    finally:
        await conn.close()


async def metadata_complete(port: int, partitions: int) -> bool:
    conn = BrokerConnection("127.0.0.1", port)
    try:
        await conn.connect()
        reply = await conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=BIG)]),
                                   version=12)
        (topic,) = reply.topics
        return len(topic.partitions) == partitions and all(p.leader_id >= 0 for p in topic.partitions)
    except Exception:
        return False
    finally:
        await conn.close()


class Refused(Exception):
    """The broker answered the request with an error (Kafka's limits), shown instead of a time."""


def _check(error_code: int, message: str | None) -> None:
    if error_code:
        raise Refused(f"{ErrorCode(error_code).name}: {message or ''}".strip())


def restart(stop, start, port: int, partitions: int) -> float:
    stop()
    began = time.monotonic()
    start()
    while not asyncio.run(metadata_complete(port, partitions)):
        time.sleep(0.05)
    return time.monotonic() - began


def measure(fn) -> str:
    try:
        return fn()
    except Refused as exc:
        return f"refused ({exc})"


def run_steps(broker, pid, restarts, partitions: int) -> list[tuple[str, str]]:
    """Every step against one broker (Ebb or Kafka): the label and the figure of each."""
    rows = [("open files, empty broker", f"{open_fds(pid())}")]
    created = measure(lambda: "{:.2f} s / {:.2f} s".format(*asyncio.run(create_big_topic(broker.port, partitions))))
    rows.append((f"CreateTopics of {partitions:,} partitions / a 1-partition one sent meanwhile", created))
    rows.append(("open files after it", f"{open_fds(pid())}"))
    if not created.startswith("refused"):
        def delete() -> str:
            return f"{asyncio.run(delete_everywhere(broker.bootstrap, broker.port, partitions)):.2f} s"

        rows.append((f"DeleteRecords over {partitions:,} partitions, one request", measure(delete)))
        for label, (stop, start) in restarts.items():
            rows.append((f"restart after {label} to a complete Metadata answer",
                         f"{restart(stop, start, broker.port, partitions):.2f} s"))
        rows.append(("open files after the restarts", f"{open_fds(pid())}"))
    rows.append((f"CreatePartitions 1 → {partitions:,}, one request",
                 measure(lambda: f"{asyncio.run(grow_topic(broker.bootstrap, broker.port, partitions)):.2f} s")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 partitions instead of 10,000")
    parser.add_argument("--partitions", type=int, help="partitions per topic (default 10,000)")
    parser.add_argument("--dir", help="where the broker's data goes (default: a temporary directory)")
    args = parser.parse_args()
    partitions = args.partitions or (2000 if args.quick else 10_000)
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-scale-", dir=args.dir))
    print(f"Scale: {partitions:,} partitions on one broker, Ebb then Kafka (disk, {root}); {machine_line()}")
    print(f"  soft limit on open files: {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}")
    goals = {"CreateTopics": "≤ 10 s", "DeleteRecords": "≤ 2 s", "restart": "≤ 15 s", "CreatePartitions": "≤ 10 s",
             "open": "bounded"}
    try:
        with Ebb(root, {"num.partitions": "1"}) as broker:
            ebb = run_steps(broker, lambda: broker.pid, {
                "SIGTERM": (lambda: broker.stop(signal.SIGTERM), broker.start),
                "SIGKILL": (lambda: broker.stop(signal.SIGKILL), broker.start)}, partitions)
        if not KAFKA_JARS.is_dir():
            raise SystemExit(f"{KAFKA_JARS} is missing: `make bench` builds it (Maven)")
        with KafkaNode(root / "kafka", f"{KAFKA_JARS}/*", {"num.partitions": "1"}) as kafka:
            kafka_rows = run_steps(kafka, lambda: kafka.process.pid, {
                "SIGTERM": (lambda: kafka.halt(signal.SIGTERM), kafka.relaunch),
                "SIGKILL": (lambda: kafka.halt(signal.SIGKILL), kafka.relaunch)}, partitions)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    kafka_by_label = dict(kafka_rows)
    width = max(len(label) for label, _ in ebb)
    print(f"  {'':<{width}}  {'Ebb':>22}  {'Kafka':>22}  goal")
    for label, value in ebb:
        goal = goals.get(label.split()[0], "")
        print(f"  {label:<{width}}  {value:>22}  {kafka_by_label.get(label, '—'):>22}  {goal}")


if __name__ == "__main__":
    main()
