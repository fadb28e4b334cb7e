"""One request at a time, the broker's own share: `python -m bench.request_latency [--quick] [--reps N]`.

With Kafka's Java perf tools as the load (bench.perf_tools) the client JVM is the limit, and its ratios
to Kafka wander by ±20 % between runs. This takes the client out: a plain socket sends the requests
those tools send, one at a time, and times each answer, on Ebb, Apache Kafka and Tansu.
- produce: Produce v9 to a topic of six partitions, each request one 16 KiB batch (15 records of 1 KiB,
  the Java producer's batch.size) per partition, acks=all, as the producer's full requests look;
- fetch: Fetch v12 of one partition from where the last answer ended, 1 MiB at most
  (max.partition.fetch.bytes), read through a 64 KiB socket receive buffer (the Java consumer's
  receive.buffer.bytes), over the records the produce step wrote.
The brokers are started once and each repetition uses a new topic on each broker in turn (the order
rotated every repetition); the first WARM_REQUESTS of each step are not counted (Kafka's JIT). Prints
the medians over repetitions of p50/p99 and Ebb's ratios to Kafka and to Tansu (< 1 is Ebb faster).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import struct
import tempfile
import time
from pathlib import Path

from bench.peers import (
    PEERS,
    Ebb,
    Kafka,
    Tansu,
    alternate,
    create_topic,
    header,
    machine_line,
    median,
    percentile,
    ratio,
    repetitions,
    row,
    run_arguments,
)
from protocol import framing
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, ProduceRequest
from protocol.records import build_batch, iter_batches
from tests.broker import data_wire as wire_requests  # the request builders the data-path tests use

PARTITIONS = 6
RECORDS_PER_BATCH = 15  # 1 KiB records in the Java producer's 16 KiB batches
VALUE = bytes(1024)
PARTITION_FETCH_BYTES = 2**20
JAVA_CONSUMER_RECEIVE_BUFFER = 64 * 1024
WARM_REQUESTS = 300
_SIZE = struct.Struct(">i")


class Wire:
    """One connection, one request in flight. Not tests/broker/wire_client.py's client: the receive buffer
    must be set before connecting (it sets the TCP window), and answers land in one reused buffer so the
    timing holds no allocation."""

    def __init__(self, port: int, receive_buffer: int | None = None) -> None:
        self.sock = socket.socket()
        if receive_buffer:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.connect(("127.0.0.1", port))
        self.buffer = bytearray(4 * PARTITION_FETCH_BYTES)
        self.correlation_id = 0

    def call(self, body, version: int) -> tuple[float, memoryview]:
        """Seconds from the request's first byte sent to the answer's last byte read, and the answer."""
        self.correlation_id += 1
        frame = framing.encode_request(body, version, self.correlation_id, "bench-request-latency")
        view = memoryview(self.buffer)
        started = time.perf_counter()
        self.sock.sendall(frame)
        got = 0
        while got < 4:
            got += self._receive(view[got:])
        size = _SIZE.unpack_from(self.buffer)[0] + 4
        while got < size:
            got += self._receive(view[got:size])
        return time.perf_counter() - started, view[4:size]

    def _receive(self, into: memoryview) -> int:
        n = self.sock.recv_into(into)
        if not n:
            raise ConnectionError("the broker closed the connection")
        return n

    def close(self) -> None:
        self.sock.close()


def produce_request(topic: str) -> ProduceRequest:
    batch = build_batch([(None, VALUE, [], int(time.time() * 1000))] * RECORDS_PER_BATCH)
    return wire_requests.produce_request(topic, 0, batch, acks=-1, timeout_ms=30_000,
                                         extra=[(p, batch) for p in range(1, PARTITIONS)])


def fetch_request(topic: str, offset: int) -> FetchRequest:
    # max_bytes as partition_max_bytes: one partition asked, so the same answer (Tansu 0.6 drops the connection
    # on this request with the Java consumer's 50 MiB)
    return wire_requests.fetch_request(topic, 0, offset, max_wait_ms=500, max_bytes=PARTITION_FETCH_BYTES,
                                       partition_max_bytes=PARTITION_FETCH_BYTES)


def produce_step(port: int, topic: str, requests: int) -> list[float]:
    wire = Wire(port)
    try:
        request, times = produce_request(topic), []
        deadline = time.monotonic() + 30
        while len(times) < requests:
            seconds, answer = wire.call(request, 9)
            errors = {p.error_code for t in framing.decode_response(bytes(answer), 0, 9)[1].responses
                      for p in t.partition_responses}
            if errors == {0}:
                times.append(seconds)
            elif times or not errors <= {0, ErrorCode.NOT_LEADER_OR_FOLLOWER} or time.monotonic() > deadline:
                raise RuntimeError(f"Produce answered error codes {sorted(errors)}")
            else:  # a new topic's leaders are still taking over (Kafka says so a moment after Metadata shows them)
                time.sleep(0.05)
        return times[WARM_REQUESTS:]
    finally:
        wire.close()


def fetch_step(port: int, topic: str, requests: int) -> list[float]:
    wire = Wire(port, JAVA_CONSUMER_RECEIVE_BUFFER)
    try:
        offset, times = 0, []
        for _ in range(requests):
            seconds, answer = wire.call(fetch_request(topic, offset), 12)
            partition = framing.decode_response(bytes(answer), 1, 12)[1].responses[0].partitions[0]
            if partition.error_code:
                raise RuntimeError(f"Fetch answered error code {partition.error_code}")
            batches = list(iter_batches(bytes(partition.records or b""), allow_partial_tail=True))
            if not batches:
                raise RuntimeError(f"Fetch at offset {offset} returned no whole batch")
            offset = batches[-1].next_offset
            if offset >= partition.high_watermark:
                offset = 0  # from the start again: the records stay in the page cache on every broker
            times.append(seconds)
        return times[WARM_REQUESTS:]
    finally:
        wire.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(parser, "fewer requests and repetitions")
    args = parser.parse_args()
    reps = repetitions(args)
    requests = 1_000 if args.quick else 3_000
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-request-latency-", dir=args.dir))
    print(f"One request at a time from a plain socket, Ebb and Kafka (disk, {root}) beside Tansu (memory engine); "
          f"{machine_line()}")
    print(f"{requests:,} requests per step, the first {WARM_REQUESTS} not counted; medians of {reps} repetitions")
    figures: dict[str, dict[str, dict[str, list[float]]]] = {
        step: {name: {"p50": [], "p99": []} for name in PEERS} for step in ("produce", "fetch")}
    try:
        with Ebb(root) as ebb, Kafka(root) as kafka, Tansu(root) as tansu:
            for rep in range(reps):
                for broker in alternate([ebb, kafka, tansu], rep):
                    topic = f"request-latency-{rep}"
                    create_topic(broker.bootstrap, topic, PARTITIONS)
                    for step, run in (("produce", produce_step), ("fetch", fetch_step)):
                        try:
                            times = run(broker.port, topic, requests)
                        except (OSError, RuntimeError) as exc:
                            raise SystemExit(f"{step} on {broker.name}: {exc} (its log: {broker.log_path()})") from exc
                        figures[step][broker.name]["p50"].append(percentile(times, 0.5) * 1e3)
                        figures[step][broker.name]["p99"].append(percentile(times, 0.99) * 1e3)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    columns = [("request", 44)] + [(f"{name} p50/p99 ms", 18) for name in PEERS] + [("p50 ÷Kafka", 11),
                                                                                   ("p50 ÷Tansu", 11)]
    header("", columns)
    widths = [width for _, width in columns]
    labels = {"produce": f"produce {PARTITIONS} x 16 KiB batches, acks=all",
              "fetch": "fetch 1 MiB of one partition, 64 KiB rcvbuf"}
    for step, label in labels.items():
        p50 = {name: median(figures[step][name]["p50"]) for name in PEERS}
        p99 = {name: median(figures[step][name]["p99"]) for name in PEERS}
        row([label, *(f"{p50[name]:.3f} / {p99[name]:.3f}" for name in PEERS),
             ratio(p50[PEERS[0]], p50[PEERS[1]]), ratio(p50[PEERS[0]], p50[PEERS[2]])], widths)


if __name__ == "__main__":
    main()
