"""Ten thousand partitions on one broker: `python -m bench.scale [--quick] [--dir PATH] [--partitions N]`.

Measured, on one Ebb broker process on disk:
  - CreateTopics of one topic with N partitions in one request; meanwhile a one-partition CreateTopics
    sent on another connection (how long topic administration holds up other requests);
  - CreatePartitions growing a second topic from 1 to N partitions in one request;
  - DeleteRecords over all N partitions of the first topic in one request (one record each);
  - restart after SIGTERM and after SIGKILL: spawn to a Metadata answer with every partition led;
  - open file descriptors of the broker process after each step (/proc/PID/fd).
Goals (issue 18): create ≤ 10 s, restart ≤ 15 s, DeleteRecords ≤ 2 s, descriptors bounded. Each
segment keeps its .log open, so descriptors grow with segments; partitions that would not fit under
`ulimit -n` are refused up front (KAFKA_STORAGE_ERROR naming the limit).

Apache Kafka is not run here yet (it needs the Kafka-oracle harness of issue 14); Tansu's memory
engine keeps no partitions on disk, so neither appears beside these figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from bench.peers import Ebb, machine_line
from client import Admin, BrokerConnection, Producer
from protocol.messages import CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest, MetadataRequest

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
        assert big_reply.topics[0].error_code == 0, big_reply.topics[0]
        assert small_reply.topics[0].error_code == 0, small_reply.topics[0]
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
        assert reply.results[0].error_code == 0, reply.results[0]
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
        errors = {p.error_code for t in reply.topics for p in t.partitions}
        assert errors == {0}, errors
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


def restart(broker: Ebb, sig: int, partitions: int) -> float:
    broker.stop(sig)
    start = time.monotonic()
    broker.start()
    while not asyncio.run(metadata_complete(broker.port, partitions)):
        time.sleep(0.05)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 partitions instead of 10,000")
    parser.add_argument("--partitions", type=int, help="partitions per topic (default 10,000)")
    parser.add_argument("--dir", help="where the broker's data goes (default: a temporary directory)")
    args = parser.parse_args()
    partitions = args.partitions or (2000 if args.quick else 10_000)
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-scale-", dir=args.dir))
    print(f"Scale: {partitions:,} partitions on one Ebb broker (disk, {root}); {machine_line()}")
    print(f"  soft limit on open files: {__import__('resource').getrlimit(__import__('resource').RLIMIT_NOFILE)[0]}")
    rows = []
    try:
        with Ebb(root, {"num.partitions": "1"}) as broker:  # a broker of its own: both topics may not fit
            grow_s = asyncio.run(grow_topic(broker.bootstrap, broker.port, partitions))
            rows.append((f"CreatePartitions 1 → {partitions:,}, one request", f"{grow_s:.2f} s", "≤ 10 s"))
        with Ebb(root, {"num.partitions": "1"}) as broker:
            rows.append(("open files, empty broker", f"{open_fds(broker.pid)}", ""))
            big_s, small_s = asyncio.run(create_big_topic(broker.port, partitions))
            rows.append((f"CreateTopics, {partitions:,} partitions, one request", f"{big_s:.2f} s", "≤ 10 s"))
            rows.append(("  a one-partition CreateTopics sent meanwhile waited", f"{small_s:.2f} s", ""))
            rows.append(("open files after it", f"{open_fds(broker.pid)}", "one per segment"))
            delete_s = asyncio.run(delete_everywhere(broker.bootstrap, broker.port, partitions))
            rows.append((f"DeleteRecords over {partitions:,} partitions, one request", f"{delete_s:.2f} s", "≤ 2 s"))
            for name, sig in (("SIGTERM", signal.SIGTERM), ("SIGKILL", signal.SIGKILL)):
                seconds = restart(broker, sig, partitions)
                rows.append((f"restart after {name} to a complete Metadata answer", f"{seconds:.2f} s", "≤ 15 s"))
            rows.append(("open files after the restarts", f"{open_fds(broker.pid)}", "one per segment"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    for label, value, goal in rows:
        print(f"  {label:<{width}}  {value:>10}  {goal}")


if __name__ == "__main__":
    main()
