"""Fetch answers sent from the segment files with sendfile (broker/file_sender.py), on a broker process:
the records arrive whole and in order across segments and partitions, through a reader slower than
the broker, pipelined behind and before other requests; pages not in the page cache are brought
back into it first, and small answers are copied. The metric `ebb_fetch_bytes_sent_from_files_total` tells which path
an answer took."""

from __future__ import annotations

import socket
import time

import pytest

from broker.log import page_cache
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest
from tests.broker.data_wire import WireClient, batch, create_topic, fetch, fetch_request, produce, values
from tests.support.broker_process import free_port
from tests.support.metrics_scrape import scrape, value
from tests.support.page_cache import drop_from_page_cache

METRICS_PORT = free_port()
VALUE = 4000
PER_BATCH = 16  # ~64 KiB batches, like a producer's
BATCHES = 8


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    # Small segments, so that one partition's answer spans several files.
    return {"ebb.metrics.listener": f"http://127.0.0.1:{METRICS_PORT}", "log.segment.bytes": str(200 * 1024),
            "ebb.testing.small.segments.enable": "true"}  # Ebb-only: segments below Kafka's 1 MiB minimum


def sent_from_files() -> float:
    return value(scrape(f"http://127.0.0.1:{METRICS_PORT}/metrics"), "ebb_fetch_bytes_sent_from_files_total") or 0


def _fill(client: WireClient, topic: str, partitions: int, batches: int = BATCHES) -> dict[int, list[bytes]]:
    create_topic(client, topic, partitions=partitions)
    written: dict[int, list[bytes]] = {}
    for p in range(partitions):
        for b in range(batches):
            chunk = [f"{topic}/{p}/{b}/{i}".encode().ljust(VALUE, b".") for i in range(PER_BATCH)]
            assert produce(client, topic, p, batch(chunk)).error_code == ErrorCode.NONE
            written.setdefault(p, []).extend(chunk)
    return written


def _expected(size: int) -> int:
    """What the metric must have grown by for an answer of `size` record bytes on this kernel."""
    return size if page_cache.available() else 0


def test_records_across_segments_and_partitions(broker, client):
    written = _fill(client, "zero-copy", partitions=3)
    before = sent_from_files()
    wanted = [(p, 0, 4 << 20) for p in range(3)]
    reply = client.request(fetch_request("zero-copy", 0, 0, partitions=wanted), 12)
    answers = reply.responses[0].partitions
    assert [values(a) for a in answers] == [written[p] for p in range(3)]
    assert sent_from_files() - before == _expected(sum(len(a.records) for a in answers))


class _SlowClient(WireClient):
    """Its receive buffer is set before connecting (as the Java client does), so it stays small, and
    it reads in small steps with pauses, so the broker's buffers drain a little at a time."""

    def __init__(self, port: int):  # not super().__init__: that connects before the buffer is set
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024)
        self.sock.connect(("127.0.0.1", port))
        self.sock.settimeout(30)
        self.client_id, self._correlation_id, self._versions = "slow", 0, None

    def _read_exact(self, n: int) -> bytes:
        got = bytearray()
        while len(got) < n:
            chunk = self.sock.recv(min(n - len(got), 16 * 1024))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            got += chunk
            time.sleep(0.0002)
        return bytes(got)


def test_a_slow_reader_with_a_small_receive_buffer_gets_every_byte(broker):
    with WireClient(broker.port) as setup:
        written = _fill(setup, "zero-copy-slow", partitions=1)
    with _SlowClient(broker.port) as client:
        for _ in range(3):
            correlation_id = client.submit(fetch_request("zero-copy-slow", 0, 0, partition_max_bytes=4 << 20), 12)
            time.sleep(0.3)  # nothing read for a while (whether the sender then waits for room is up to the
            # kernel's socket buffers; tests/unit/test_file_sender.py makes it wait)
            reply = client.receive(1, 12, correlation_id)
            assert values(reply.responses[0].partitions[0]) == written[0]


def test_pipelined_requests_are_answered_in_order(broker, client):
    written = _fill(client, "zero-copy-pipelined", partitions=2)
    asked = []
    for p in (0, 1, 0):
        asked.append(("fetch", p, client.submit(fetch_request("zero-copy-pipelined", p, 0,
                                                              partition_max_bytes=4 << 20), 12)))
        asked.append(("versions", p, client.submit(ApiVersionsRequest(), 0)))
    for kind, p, correlation_id in asked:
        if kind == "fetch":
            reply = client.receive(1, 12, correlation_id)
            assert values(reply.responses[0].partitions[0]) == written[p]
        else:
            assert client.receive(18, 0, correlation_id).error_code == ErrorCode.NONE


def test_pages_not_in_the_page_cache_are_brought_in_and_sent_from_files(broker, client):
    """A segment evicted from the page cache (a proactive reclaimer does it minutes after the write): its
    pages are read back into the cache in the pool, and the answer still leaves from the files."""
    written = _fill(client, "zero-copy-cold", partitions=1)
    _drop_from_page_cache(broker, "zero-copy-cold-0")
    before = sent_from_files()
    reply = fetch(client, "zero-copy-cold", 0, 0, partition_max_bytes=4 << 20)
    assert values(reply) == written[0]
    assert sent_from_files() - before == _expected(len(reply.records))


def test_a_partition_whose_pages_are_missing_is_sent_from_files_beside_a_cached_one(broker, client):
    written = _fill(client, "zero-copy-half", partitions=2)
    _drop_from_page_cache(broker, "zero-copy-half-1")
    before = sent_from_files()
    reply = client.request(fetch_request("zero-copy-half", 0, 0, partitions=[(p, 0, 4 << 20) for p in range(2)]), 12)
    answers = reply.responses[0].partitions
    assert [values(a) for a in answers] == [written[0], written[1]]
    assert sent_from_files() - before == _expected(sum(len(a.records) for a in answers))


def test_a_small_answer_is_copied(broker, client):
    create_topic(client, "zero-copy-small")
    assert produce(client, "zero-copy-small", 0, batch([b"v" * 100] * 10)).error_code == ErrorCode.NONE
    before = sent_from_files()
    assert values(fetch(client, "zero-copy-small", 0, 0)) == [b"v" * 100] * 10
    assert sent_from_files() == before


def test_copied_answers_and_answers_from_files_in_turn(broker):
    """Pipelined fetches to a slow reader: answers of 6 MiB from files (more than the socket buffers hold;
    the first finds its pages dropped from the page cache, brought in before it is sent) with small
    copied answers between them; each answer arrives whole and in order."""
    with WireClient(broker.port) as setup:  # 6 MiB: more than the socket buffers hold (4 MiB at most)
        written = _fill(setup, "zero-copy-queued", partitions=2, batches=48)
        create_topic(setup, "zero-copy-queued-small")
        small = [b"s" * 100] * 10
        assert produce(setup, "zero-copy-queued-small", 0, batch(small)).error_code == ErrorCode.NONE
    for p in range(2):
        _drop_from_page_cache(broker, f"zero-copy-queued-{p}")
    both = [(p, 0, 8 << 20) for p in range(2)]
    before, from_files = sent_from_files(), 0
    with _SlowClient(broker.port) as client:
        asked = []
        for _ in range(3):
            asked.append((client.submit(fetch_request("zero-copy-queued", 0, 0, partitions=both), 12),
                          [written[0], written[1]]))
            asked.append((client.submit(fetch_request("zero-copy-queued-small", 0, 0), 12), [small]))
        time.sleep(0.5)  # not read yet: the first answer fills the socket and waits in the transport
        for correlation_id, wanted in asked:
            answers = client.receive(1, 12, correlation_id).responses[0].partitions
            assert [values(a) for a in answers] == wanted
            if len(wanted) == 2:
                from_files += sum(len(a.records) for a in answers)
    assert sent_from_files() - before == _expected(from_files)


def _drop_from_page_cache(broker, directory: str) -> None:
    for segment in (broker.data_dir / "logs" / directory).glob("*.log"):
        drop_from_page_cache(segment)
