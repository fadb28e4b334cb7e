"""DeleteRecords latency on three Ebb brokers: `python -m bench.delete_records_cluster [--quick] [--dir PATH]`.

ZooKeeper (Debian's package, started here) and three broker processes on loopback, replication
factor 3, every replica in sync, `replica.fetch.wait.max.ms` at Kafka's default of 500 ms. Records are
produced first, then DeleteRecords v3 requests move the log start offset up one record at a time,
sent to the leader one after another:
  - all-replica (LeaderOnly=false, Kafka's semantics): answered once every alive replica's log
    start offset is durable at the offset — the followers learn it from their next Fetch answer,
    which the leader sends at once when its log start offset moves (issue 19);
  - leader-only (LeaderOnly=true, KIP-1343): answered once the leader's log start offset is durable.
for one partition per request and for the partitions of a 100-partition topic that one broker
leads (about a third of them) per request. Prints p50/p99 in ms.
Goal (issue 19): all-replica p99 ≤ 10 ms, within a few milliseconds of leader-only.

Then the same on Apache Kafka 4.3.1: three nodes from its jars (node 1 the KRaft controller too),
the same fetch wait; Kafka serves DeleteRecords up to v2, so it has no leader-only row.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from bench.delete_records import RawConnection
from bench.peers import percentile
from protocol import framing
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest, DeleteRecordsRequest
from tests.broker.wire_client import WireClient, metadata
from tests.cluster.three_brokers import three_brokers
from tests.interop.conftest import TARGET, build
from tests.support.kafka_node import kafka_cluster
from tests.support.zookeeper import ZooKeeperServer

API_KEY, VERSION = 21, 3
FETCH_WAIT_MS = "500"


def timed(conn: RawConnection, topic: str, partitions: list[int], offsets: range, leader_only: bool,
          version: int) -> list[float]:
    """Latency (ms) of one DeleteRecords per offset over `partitions`; each must reach the offset."""
    Req = DeleteRecordsRequest
    latencies = []
    for i, offset in enumerate(offsets):
        body = Req(topics=[Req.DeleteRecordsTopic(name=topic, partitions=[
            Req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=offset) for p in partitions])],
            timeout_ms=30_000, leader_only=leader_only)
        frame = framing.encode_request(body, version, i, "bench")
        start = time.perf_counter()
        response = conn.round_trip(frame)
        latencies.append((time.perf_counter() - start) * 1e3)
        _, answer = framing.decode_response(response, API_KEY, version)
        for t in answer.topics:
            for p in t.partitions:
                reached = p.leader_log_start_offset if leader_only else p.low_watermark
                if p.error_code != ErrorCode.NONE or reached != offset:
                    raise RuntimeError(f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}, "
                                       f"low watermark {p.low_watermark}, leader {p.leader_log_start_offset}")
    return latencies


def measure(name: str, bootstraps: dict[int, str], requests: int) -> None:
    """Create the topics, fill them, and print the latency rows for one cluster."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = ",".join(bootstraps.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = {"one": 1, "hundred": 100}
    for topic, count in topics.items():
        admin.create_topics([NewTopic(topic, count, 3)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for topic, count in topics.items():
        for p in range(count):
            for _ in range(2 * requests + 1):
                producer.produce(topic, b"x" * 100, partition=p)
            producer.poll(0)
    producer.flush(120)
    any_port = int(next(iter(bootstraps.values())).rsplit(":", 1)[1])
    top = max_delete_records_version(any_port)
    for topic, count in topics.items():
        # a request goes to one leader: the partitions led by partition 0's leader
        leaders = leaders_of(any_port, topic, count)
        led = [p for p, leader in leaders.items() if leader == leaders[0]]
        conn = RawConnection(bootstraps[leaders[0]])
        try:
            for leader_only, first in ((False, 1), (True, requests + 1)):
                mode = "leader-only" if leader_only else "all-replica"
                if leader_only and top < 3:
                    print(f"  {name:5} {mode}  {len(led):3d} partition(s) per request   not offered (DeleteRecords "
                          f"up to v{top})", flush=True)
                    continue
                latencies = timed(conn, topic, led, range(first, first + requests), leader_only, min(top, 3))
                print(f"  {name:5} {mode}  {len(led):3d} partition(s) per request   "
                      f"p50 {percentile(latencies, 0.5):7.2f} ms   p99 {percentile(latencies, 0.99):7.2f} ms"
                      f"   ({len(latencies)} requests)", flush=True)
        finally:
            conn.close()


def leaders_of(port: int, topic: str, count: int) -> dict[int, int]:
    deadline = time.monotonic() + 60
    while True:
        with WireClient(port) as client:
            (found,) = metadata(client, [topic]).topics
        leaders = {p.partition_index: p.leader_id for p in found.partitions}
        if len(leaders) == count and min(leaders.values()) >= 0:
            return leaders
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: partitions without a leader")
        time.sleep(0.2)


def max_delete_records_version(port: int) -> int:
    with WireClient(port) as client:
        reply = client.send(ApiVersionsRequest(), 0)
    return next(k.max_version for k in reply.api_keys if k.api_key == API_KEY)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    parser.add_argument("--dir", help="where the brokers' data goes (default: a temporary directory)")
    args = parser.parse_args()
    requests = 50 if args.quick else 200
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-delete-cluster-", dir=args.dir))
    print(f"DeleteRecords on three brokers, RF=3, replica.fetch.wait.max.ms={FETCH_WAIT_MS} ({root})")
    try:
        with ZooKeeperServer(root / "zookeeper") as zk, \
                three_brokers(zk.connect, root / "ebb", {"replica.fetch.wait.max.ms": FETCH_WAIT_MS}) as brokers:
            measure("Ebb", {n: b.bootstrap for n, b in brokers.items()}, requests)
        build()  # the pinned Kafka jars (tests/interop/java/pom.xml), fetched by Maven once
        with kafka_cluster(root / "kafka", f"{TARGET / 'lib'}/*", 3,
                           {"replica.fetch.wait.max.ms": FETCH_WAIT_MS, "default.replication.factor": "3"}) as nodes:
            measure("Kafka", {int(n.properties["node.id"]): n.bootstrap for n in nodes}, requests)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
