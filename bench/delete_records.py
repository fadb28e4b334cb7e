"""DeleteRecords latency on Ebb, beside Apache Kafka: `python -m bench.delete_records [--quick] [--dir PATH]`.

One broker process (data on disk, `log.start.offset.checkpoint.sync=true`, the default: a request
is answered only once the new log start offsets are in `log-start-offset-checkpoint` on disk, i.e.
written to a temporary file, fsynced, renamed and the directory fsynced). Records are produced first
(confluent-kafka), then DeleteRecords v3 requests move the log start offset up one record at a time:
  - one partition per request, many requests;
  - one request naming all 1,000 partitions of a topic, several requests;
each with LeaderOnly=false (Kafka's semantics: wait for the low watermark, which on one broker is
the leader's durable log start offset) and LeaderOnly=true (Ebb's extension: answer once the leader's
log start offset is durable). Requests are pre-encoded and sent one at a time on a plain socket; the
latency runs from sending the request to having the whole response. Prints p50/p99 in ms.

Kafka 4.3.1 (one KRaft node, bench/peers.py) then gets the same two shapes at v2, its highest
version (what LeaderOnly=false is on Ebb); Kafka writes its log start offset checkpoint in the
background, so its answer does not wait for a disk flush. Ebb's p50 ratio to Kafka's is printed.

Tansu is not measured: its memory engine does not implement DeleteRecords and answers it by closing
the connection; the benchmark sends it one request and prints what happened.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import struct
import tempfile
import time
from pathlib import Path

from bench.peers import Ebb, Kafka, Tansu, create_topic, machine_line, percentile, ratio
from bench.produce import produce_load
from protocol import framing
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import DeleteRecordsRequest

API_KEY = ApiKey.DELETE_RECORDS
VERSION = 3
SIZE = struct.Struct(">i")


class RawConnection:
    """A blocking socket speaking whole frames: send one request, read one response."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def round_trip(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        size = SIZE.unpack(self._read_exactly(4))[0]
        return self._read_exactly(size)

    def close(self) -> None:
        self.sock.close()


def delete_request(topic: str, partitions: range, offset: int, leader_only: bool, correlation_id: int,
                   version: int = VERSION) -> bytes:
    Req = DeleteRecordsRequest
    body = Req(topics=[Req.DeleteRecordsTopic(name=topic, partitions=[
        Req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=offset) for p in partitions])],
        timeout_ms=30_000, leader_only=leader_only)
    return framing.encode_request(body, version, correlation_id, "bench")


def timed_deletes(conn: RawConnection, topic: str, partitions: range, offsets: range, leader_only: bool,
                  version: int = VERSION) -> list[float]:
    """Latency (ms) of one DeleteRecords per offset; every partition must succeed."""
    frames = [delete_request(topic, partitions, offset, leader_only, i, version) for i, offset in enumerate(offsets)]
    latencies = []
    for i, frame in enumerate(frames):
        start = time.perf_counter()
        response = conn.round_trip(frame)
        latencies.append((time.perf_counter() - start) * 1e3)
        correlation_id, body = framing.decode_response(response, API_KEY, version)
        assert correlation_id == i
        for t in body.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE or p.low_watermark != offsets[i]:
                    raise RuntimeError(f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}, "
                                       f"low watermark {p.low_watermark}, wanted {offsets[i]}")
    return latencies


def tansu_answer(root: Path) -> str:
    with Tansu(root) as tansu:
        create_topic(tansu.bootstrap, "bench-delete", 1)
        produce_load(tansu.bootstrap, "bench-delete", 1, 10, 100)
        conn = RawConnection(tansu.bootstrap)
        try:
            conn.round_trip(framing.encode_request(_v2_request(), 2, 0, "bench"))
            return "answered (unexpected)"
        except (ConnectionError, OSError) as exc:
            return f"DeleteRecords v2 -> {exc}"
        finally:
            conn.close()


def _v2_request():
    Req = DeleteRecordsRequest
    return Req(topics=[Req.DeleteRecordsTopic(name="bench-delete", partitions=[
        Req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=5)])], timeout_ms=30_000)


def row(label: str, latencies: list[float], note: str = "") -> list[float]:
    print(f"  {label:<52} p50 {percentile(latencies, 0.5):8.2f} ms   p99 {percentile(latencies, 0.99):8.2f} ms"
          f"   ({len(latencies)} requests){note}", flush=True)
    return latencies


def on_kafka(root: Path, single: int, many: int, partitions: int, ebb_p50: dict[str, float]) -> None:
    """The same two shapes at v2 on Kafka, with Ebb's LeaderOnly=false p50 over Kafka's."""
    with Kafka(root) as kafka:
        create_topic(kafka.bootstrap, "one", 1)
        create_topic(kafka.bootstrap, "many", partitions)
        produce_load(kafka.bootstrap, "one", 1, single + 1, 100)
        produce_load(kafka.bootstrap, "many", partitions, (many + 1) * partitions, 100)
        conn = RawConnection(kafka.bootstrap)
        try:
            print("\nKafka 4.3.1, DeleteRecords v2 (waits for the low watermark)")
            for shape, topic, parts, count in (("one", "one", range(1), single),
                                               ("many", "many", range(partitions), many)):
                latencies = timed_deletes(conn, topic, parts, range(1, count + 1), False, version=2)
                label = "one partition per request" if shape == "one" else f"one request, {partitions:,} partitions"
                row(label, latencies, f"; Ebb/Kafka p50 {ratio(ebb_p50[shape], percentile(latencies, 0.5))}")
        finally:
            conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    parser.add_argument("--dir", default=None, help="where Ebb's data goes (default: system temp dir)")
    args = parser.parse_args()
    single, many, partitions = (200, 10, 1000) if args.quick else (1000, 40, 1000)
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-delete-", dir=args.dir))
    print(f"DeleteRecords latency on Ebb (disk, {root}, durable log start offset checkpoint), beside Kafka; "
          f"{machine_line()}")
    try:
        with Ebb(root, {"log.start.offset.checkpoint.sync": "true", "delete.records.v3.enable": "true"}) as ebb:
            create_topic(ebb.bootstrap, "one", 1)
            create_topic(ebb.bootstrap, "many", partitions)
            produce_load(ebb.bootstrap, "one", 1, 2 * single + 1, 100)
            produce_load(ebb.bootstrap, "many", partitions, (2 * many + 1) * partitions, 100)
            conn = RawConnection(ebb.bootstrap)
            try:
                print("\nOne partition per request (each moves the log start offset by one record)")
                ebb_p50 = {"one": percentile(row("LeaderOnly=false (wait for the low watermark)",
                                                 timed_deletes(conn, "one", range(1), range(1, single + 1), False)),
                                             0.5)}
                row("LeaderOnly=true (leader's start offset durable)",
                    timed_deletes(conn, "one", range(1), range(single + 1, 2 * single + 1), True))
                print(f"\nOne request over {partitions:,} partitions (each moves every start offset by one)")
                ebb_p50["many"] = percentile(row("LeaderOnly=false", timed_deletes(
                    conn, "many", range(partitions), range(1, many + 1), False)), 0.5)
                row("LeaderOnly=true", timed_deletes(conn, "many", range(partitions), range(many + 1, 2 * many + 1),
                                                     True))
            finally:
                conn.close()
        on_kafka(root, single, many, partitions, ebb_p50)
        print("\nTansu 0.6 (memory engine): not measured, DeleteRecords is not implemented there; observed: "
              f"{tansu_answer(root)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
