"""Bad input on the wire: the broker answers what it can, closes the connection it cannot parse, and
keeps serving everyone else.

The corpus: request frames captured from the four real clients (tests/protocol/golden), mutated
(bit flips, overwrites, truncation, insertion, extreme int16/int32 values, other api key or
version), frames of random bytes behind a plausible header, broken framing (negative, zero,
oversized and truncated size prefixes, unframed garbage), and real and mutated frames pipelined
on one connection. The seed is fixed, so a failure replays. CreateTopics/CreatePartitions are left
out of the mutated corpus: a mutated partition count is a resource question, not a parsing one.

For each frame the broker may answer, close the connection, or stay silent (acks=0 produce, a
long-poll fetch); the test only waits a bounded time per frame. Afterwards the broker process is
alive, a connection opened before the storm still gets answers, and a real client works.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conformance.scenario import RDKAFKA_LOG

pytestmark = pytest.mark.timeout(150)

SEED = 20261122
GOLDEN = Path(__file__).resolve().parents[1] / "protocol" / "golden"
EXCLUDED_KEYS = {19, 37}  # CreateTopics, CreatePartitions
KNOWN_KEYS = [0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 21, 22, 32, 33, 44, 60]
WAIT_PER_FRAME_S = 1.0
CONCURRENCY = 24
MUTATIONS_PER_FRAME = 8
RANDOM_FRAMES = 200
PIPELINED = 40


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def header(api_key: int, api_version: int, correlation_id: int, client_id: bytes = b"bad-input") -> bytes:
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id


def api_versions_v0(correlation_id: int) -> bytes:
    return frame(header(18, 0, correlation_id))


def golden_requests() -> list[bytes]:
    bodies = []
    for path in sorted(GOLDEN.glob("*/*-request.bin")):
        body = path.read_bytes()
        if len(body) >= 4 and struct.unpack(">h", body[:2])[0] not in EXCLUDED_KEYS:
            bodies.append(body)
    if not bodies:  # the golden corpus moved: fall back to a few frames built here
        bodies = [header(18, v, 1) for v in range(3)] + [header(3, 1, 2) + struct.pack(">i", -1)]
    return bodies


def mutate(rng: random.Random, body: bytes) -> bytes:
    data = bytearray(body)
    kind = rng.randrange(8)
    if kind == 0:  # flip bits
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # overwrite a run with random bytes
        i = rng.randrange(len(data))
        n = rng.randint(1, 16)
        data[i : i + n] = rng.randbytes(min(n, len(data) - i))
    elif kind == 2:  # truncate
        del data[rng.randrange(len(data)) :]
    elif kind == 3:  # insert random bytes
        i = rng.randrange(len(data) + 1)
        data[i:i] = rng.randbytes(rng.randint(1, 32))
    elif kind == 4:  # extreme int16/int32 at a random place: length fields and array counts
        value, fmt = rng.choice([(-1, ">h"), (0x7FFF, ">h"), (-1, ">i"), (0x7FFFFFFF, ">i"), (-(2**31), ">i")])
        i = rng.randrange(max(1, len(data) - 4))
        data[i : i + struct.calcsize(fmt)] = struct.pack(fmt, value)
    elif kind == 5:  # another version of the same api
        data[2:4] = struct.pack(">h", rng.choice([-1, rng.randint(0, 20), 0x7FFF]))
    elif kind == 6:  # another api with this body
        data[0:2] = struct.pack(">h", rng.choice([*KNOWN_KEYS, -1, 99, 0x7FFF]))
    else:  # duplicate a slice
        i = rng.randrange(len(data))
        j = rng.randint(i, len(data))
        data[j:j] = data[i:j]
    if len(data) >= 2 and struct.unpack(">h", data[:2])[0] in EXCLUDED_KEYS:
        data[0:2] = struct.pack(">h", 18)
    return bytes(data)


def random_frame_body(rng: random.Random) -> bytes:
    if rng.random() < 0.7:  # plausible header, random body
        body = header(
            rng.choice(KNOWN_KEYS), rng.randint(0, 16), rng.randint(0, 2**31 - 1), rng.randbytes(rng.randint(0, 12))
        )
        return body + rng.randbytes(rng.randint(0, 512))
    return rng.randbytes(rng.randint(0, 256))


def broken_framing(rng: random.Random) -> list[bytes]:
    return [
        struct.pack(">i", -1) + b"\x00" * 16,
        struct.pack(">i", -(2**31)),
        struct.pack(">i", 0),
        struct.pack(">i", 0x7FFFFFFF) + b"\x00\x12" * 8,
        struct.pack(">i", 200_000_000) + rng.randbytes(64),  # above socket.request.max.bytes (100 MiB)
        struct.pack(">i", 100) + rng.randbytes(10),  # truncated, then we hang up
        b"\x00\x00",  # not even a size
        b"GET / HTTP/1.1\r\nHost: ebb\r\n\r\n",
        rng.randbytes(4096),
        api_versions_v0(7) + frame(rng.randbytes(40)) + api_versions_v0(8),  # pipelined: good, bad, good
    ]


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


async def send(bootstrap: str, payload: bytes, wait_s: float = WAIT_PER_FRAME_S) -> str:
    """Send raw bytes; 'response' (a frame came back), 'closed' (EOF/reset) or 'silent'."""
    host, port = bootstrap.rsplit(":", 1)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 5)
    try:
        try:
            writer.write(payload)
            await writer.drain()
            await asyncio.wait_for(read_frame(reader), wait_s)
            return "response"
        except TimeoutError:
            return "silent"
        except (asyncio.IncompleteReadError, ConnectionError):
            return "closed"
    finally:
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 2)
        except (TimeoutError, ConnectionError):
            pass


async def wait_closed(reader: asyncio.StreamReader, timeout_s: float) -> bool:
    """True when the broker closes the connection (EOF or reset) within timeout_s."""
    try:
        async with asyncio.timeout(timeout_s):
            while await reader.read(65536):
                pass
        return True
    except ConnectionError:
        return True
    except TimeoutError:
        return False


async def api_versions(reader, writer, correlation_id: int) -> tuple[int, int, dict[int, tuple[int, int]]]:
    writer.write(api_versions_v0(correlation_id))
    await writer.drain()
    body = await asyncio.wait_for(read_frame(reader), 10)
    corr, error, count = struct.unpack(">ihi", body[:10])
    keys = {}
    for i in range(count):
        key, low, high = struct.unpack(">hhh", body[10 + 6 * i : 16 + 6 * i])
        keys[key] = (low, high)
    return corr, error, keys


async def connect(broker):
    return await asyncio.wait_for(asyncio.open_connection(broker.host, broker.port), 5)


async def test_unsupported_api_versions_version_gets_error_35(broker):
    # librdkafka and kafka-python open with ApiVersions v3/v4 (header v2, flexible body) and step
    # down on UNSUPPORTED_VERSION, reading the broker's range from the v0-layout answer.
    reader, writer = await connect(broker)
    try:
        body = struct.pack(">hhih", 18, 0x7F, 77, 4) + b"test" + b"\x00"  # header v2: tagged fields
        body += b"\x05ebb-\x041.0\x00"  # client_software_name, client_software_version, tags
        writer.write(frame(body))
        await writer.drain()
        response = await asyncio.wait_for(read_frame(reader), 10)
    finally:
        writer.close()
    corr, error, count = struct.unpack(">ihi", response[:10])
    assert (corr, error) == (77, 35)
    keys = {struct.unpack(">h", response[10 + 6 * i : 12 + 6 * i])[0] for i in range(count)}
    assert 18 in keys


@pytest.mark.parametrize(
    "prefix",
    [struct.pack(">i", 0x7FFFFFFF), struct.pack(">i", 200_000_000), struct.pack(">i", -1)],
    ids=["int32-max", "200MB", "negative"],
)
async def test_bad_size_prefix_closes_the_connection(broker, prefix):
    reader, writer = await connect(broker)
    try:
        writer.write(prefix + b"\x00\x12\x00\x00\x00\x00\x00\x01")
        await writer.drain()
        assert await wait_closed(reader, 10), "the broker kept a connection whose size prefix it cannot accept"
    finally:
        writer.close()


async def test_unknown_api_key_is_answered_or_closed(broker):
    reader, writer = await connect(broker)
    try:
        writer.write(frame(header(0x7FFF, 0, 5) + b"\x00" * 8))
        await writer.drain()
        try:
            body = await asyncio.wait_for(read_frame(reader), 10)
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # closed: what Kafka does
        except TimeoutError:
            pytest.fail("no answer and no close for an unknown api key: a client would wait forever")
        assert struct.unpack(">i", body[:4])[0] == 5
    finally:
        writer.close()


async def test_random_and_mutated_frames(broker):
    rng = random.Random(SEED)
    cases: list[tuple[str, bytes]] = []
    for body in golden_requests():
        cases += [("mutated", frame(mutate(rng, body))) for _ in range(MUTATIONS_PER_FRAME)]
    cases += [("random", frame(random_frame_body(rng))) for _ in range(RANDOM_FRAMES)]
    cases += [("framing", payload) for payload in broken_framing(rng)]
    # Several frames back to back on one connection, real and mutated mixed.
    bodies = golden_requests()
    for _ in range(PIPELINED):
        picks = [rng.choice(bodies) for _ in range(rng.randint(2, 6))]
        cases.append(("pipelined", b"".join(frame(mutate(rng, b) if rng.random() < 0.5 else b) for b in picks)))
    rng.shuffle(cases)

    # A connection that is open, and has been served, before the storm.
    reader, writer = await connect(broker)
    try:
        assert (await api_versions(reader, writer, 1))[:2] == (1, 0)

        outcomes: Counter[tuple[str, str]] = Counter()
        semaphore = asyncio.Semaphore(CONCURRENCY)

        async def one(kind: str, payload: bytes) -> None:
            async with semaphore:
                try:
                    outcomes[(kind, await send(broker.bootstrap, payload))] += 1
                except (TimeoutError, ConnectionError) as e:  # could not even connect
                    outcomes[(kind, f"connect failed: {e!r}")] += 1

        started = time.monotonic()
        await asyncio.gather(*(one(kind, payload) for kind, payload in cases))
        summary = f"{len(cases)} frames (seed {SEED}) in {time.monotonic() - started:.1f}s: {dict(outcomes)}"
        print(summary)

        connect_failures = {k: n for k, n in outcomes.items() if k[1].startswith("connect failed")}
        assert not connect_failures, f"the broker stopped accepting connections: {summary}"
        if broker.process is not None:
            assert broker.process.process.poll() is None, f"the broker exited: {summary}"
        # The connection opened before the storm is untouched by it.
        assert (await api_versions(reader, writer, 2))[:2] == (2, 0), summary
    finally:
        writer.close()

    reader, writer = await connect(broker)
    try:
        assert (await api_versions(reader, writer, 3))[:2] == (3, 0)
    finally:
        writer.close()


@pytest.mark.apis("CreateTopics", "Metadata", "Produce", "Fetch", "DeleteTopics")
def test_still_serves_a_real_client(broker):
    topic = f"after-bad-input-{random.Random().randrange(1 << 30):x}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA_LOG, "socket.timeout.ms": 10000})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)], request_timeout=10)[topic].result(10)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA_LOG, "acks": "all", "linger.ms": 5})
    errors = []
    for i in range(20):
        producer.produce(
            topic, value=b"ok-%d" % i, partition=0, on_delivery=lambda err, msg: err and errors.append(err)
        )
    assert producer.flush(20) == 0 and errors == []

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "logger": RDKAFKA_LOG,
            "group.id": "conformance-unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "fetch.wait.max.ms": 100,
        }
    )
    values = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 15
        while len(values) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.topic() is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    finally:
        consumer.close()
    assert values == [b"ok-%d" % i for i in range(20)]
    admin.delete_topics([topic], request_timeout=10)[topic].result(10)
