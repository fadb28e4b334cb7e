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

Apache Kafka's all-replica latency on a three-node Kafka cluster is not measured here yet (the
Kafka-from-its-jars harness is issue 14's); with the same 500 ms fetch wait, Kafka answers at the
followers' next fetch, i.e. up to that wait.
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
from protocol.messages import DeleteRecordsRequest
from tests.cluster.three_brokers import partition_state, three_brokers
from tests.support.zookeeper import ZooKeeperServer

API_KEY, VERSION = 21, 3
FETCH_WAIT_MS = "500"


def timed(conn: RawConnection, topic: str, partitions: list[int], offsets: range, leader_only: bool) -> list[float]:
    """Latency (ms) of one DeleteRecords per offset over `partitions`; each must reach the offset."""
    Req = DeleteRecordsRequest
    latencies = []
    for i, offset in enumerate(offsets):
        body = Req(topics=[Req.DeleteRecordsTopic(name=topic, partitions=[
            Req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=offset) for p in partitions])],
            timeout_ms=30_000, leader_only=leader_only)
        frame = framing.encode_request(body, VERSION, i, "bench")
        start = time.perf_counter()
        response = conn.round_trip(frame)
        latencies.append((time.perf_counter() - start) * 1e3)
        _, answer = framing.decode_response(response, API_KEY, VERSION)
        for t in answer.topics:
            for p in t.partitions:
                reached = p.leader_log_start_offset if leader_only else p.low_watermark
                if p.error_code != ErrorCode.NONE or reached != offset:
                    raise RuntimeError(f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}, "
                                       f"low watermark {p.low_watermark}, leader {p.leader_log_start_offset}")
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    parser.add_argument("--dir", help="where the brokers' data goes (default: a temporary directory)")
    args = parser.parse_args()
    requests = 50 if args.quick else 200
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-delete-cluster-", dir=args.dir))
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    print(f"DeleteRecords on three Ebb brokers, RF=3, replica.fetch.wait.max.ms={FETCH_WAIT_MS} ({root})")
    try:
        with ZooKeeperServer(root / "zookeeper") as zk, \
                three_brokers(zk.connect, root, {"replica.fetch.wait.max.ms": FETCH_WAIT_MS}) as brokers:
            bootstrap = ",".join(b.bootstrap for b in brokers.values())
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topics = {"one": 1, "hundred": 100}
            for name, count in topics.items():
                admin.create_topics([NewTopic(name, count, 3)])[name].result(60)
            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
            for name, count in topics.items():
                for p in range(count):
                    for _ in range(2 * requests + 1):
                        producer.produce(name, b"x" * 100, partition=p)
                    producer.poll(0)
            producer.flush(120)
            for name, count in topics.items():
                # a request goes to one leader: the partitions led by partition 0's leader
                states = {p: partition_state(brokers[1], name, p) for p in range(count)}
                leader = states[0].leader_id
                led = [p for p, state in states.items() if state.leader_id == leader]
                conn = RawConnection(brokers[leader].bootstrap)
                try:
                    for leader_only, first in ((False, 1), (True, requests + 1)):
                        latencies = timed(conn, name, led, range(first, first + requests), leader_only)
                        mode = "leader-only" if leader_only else "all-replica"
                        print(f"  {mode}  {len(led):3d} partition(s) per request   "
                              f"p50 {percentile(latencies, 0.5):7.2f} ms   p99 {percentile(latencies, 0.99):7.2f} ms"
                              f"   ({len(latencies)} requests)", flush=True)
                finally:
                    conn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _timed_partitions(conn, topic, partitions, offsets, leader_only):
    latencies = []
    for i, offset in enumerate(offsets):
        from protocol.messages import DeleteRecordsRequest

        Req = DeleteRecordsRequest
        body = Req(topics=[Req.DeleteRecordsTopic(name=topic, partitions=[
            Req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=offset) for p in partitions])],
            timeout_ms=30_000, leader_only=leader_only)
        frame = framing.encode_request(body, VERSION, i, "bench")
        start = time.perf_counter()
        response = conn.round_trip(frame)
        latencies.append((time.perf_counter() - start) * 1e3)
        _, answer = framing.decode_response(response, API_KEY, VERSION)
        for t in answer.topics:
            for p in t.partitions:
                reached = p.leader_log_start_offset if leader_only else p.low_watermark
                if p.error_code != ErrorCode.NONE or reached != offset:
                    raise RuntimeError(f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}, "
                                       f"low watermark {p.low_watermark}, leader {p.leader_log_start_offset}")
    return latencies


if __name__ == "__main__":
    main()
