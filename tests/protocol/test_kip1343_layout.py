"""DeleteRecords v3 byte for byte as KIP-1343 writes it, checked by a reader that shares no code with Ebb.

The layouts come from the KIP's own text: `golden/kip-1343-message-specs.diff` is the KIP's diff of
DeleteRecordsRequest.json and DeleteRecordsResponse.json, copied verbatim from the seed
(shared/seeds/001_ef13399d30084eb9.txt), applied here to the v2 specs that kafka-python 3 ships
(Kafka's own files). A small decoder in this file reads those specs; it does not use Ebb's codec,
spec loader or framing. A real broker process is reached through a recording proxy, and the bytes our
client sent and the broker answered are decoded with the KIP's layout.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import re
import struct
from pathlib import Path

import pytest

from client import Admin, Producer
from protocol.specs import _build_message
from tests.protocol.test_oracle import wire_signature
from tests.support.broker_process import BrokerProcess, free_port

HERE = Path(__file__).parent
DIFF = HERE / "golden" / "kip-1343-message-specs.diff"
SEED = HERE.parents[2] / "shared" / "seeds" / "001_ef13399d30084eb9.txt"
DELETE_RECORDS = 21
COMMENTS = re.compile(r"(?m)((?:^\s*//.*\n?)+)")  # how Kafka's spec files carry comments


# -- the KIP's diff applied to Kafka's v2 specs -------------------------------------------------

def _hunks(diff_text: str) -> dict[str, list[list[str]]]:
    """Hunks per spec file name. The seed lost the diff's leading spaces, so unprefixed lines are context."""
    hunks: dict[str, list[list[str]]] = {}
    current: list[str] | None = None
    name = None
    for line in diff_text.splitlines():
        if "--git a/" in line:  # "diff --git" (the seed also has one as "iff --git")
            name = line.rsplit("/", 1)[1]
            current = None
        elif line.startswith("@@"):
            current = []
            hunks.setdefault(name, []).append(current)
        elif current is not None:
            current.append(line)
    return hunks


def _side(hunk: list[str], drop: str) -> list[str]:
    """One side of a hunk (old: drop '+' lines; new: drop '-' lines), prefixes removed, blank lines skipped."""
    out = []
    for line in hunk:
        if line.startswith(drop):
            continue
        text = line[1:] if line[:1] in "+-" else line
        if text.strip():
            out.append(text.strip())
    return out


def _apply(target: list[str], hunk: list[str]) -> list[str]:
    # Text between one diff and the next ("DeleteRecordsResponse.json add ...") trails the last hunk:
    # drop trailing unprefixed lines until the hunk's old side is found in the file.
    while hunk:
        old = _side(hunk, "+")
        for at in range(len(target) - len(old) + 1):
            if target[at:at + len(old)] == old:
                return target[:at] + _side(hunk, "-") + target[at + len(old):]
        assert hunk[-1][:1] not in "+-", f"the KIP's hunk does not apply: {hunk}"
        hunk = hunk[:-1]
    raise AssertionError("empty hunk")


def kip_spec(name: str) -> dict:
    text = importlib.resources.files("kafka.protocol.schemas.resources").joinpath(f"{name}.json").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for hunk in _hunks(DIFF.read_text())[f"{name}.json"]:
        lines = _apply(lines, hunk)
    return json.loads(COMMENTS.sub("", "\n".join(lines) + "\n"))


# -- an independent reader for those specs --------------------------------------------------------

def _in(versions: str, version: int) -> bool:
    if versions.endswith("+"):
        return version >= int(versions[:-1])
    low, _, high = versions.partition("-")
    return int(low) <= version <= int(high or low)


class Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str):
        (value,) = struct.unpack_from(">" + fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def string(self, compact: bool) -> str | None:
        size = self.uvarint() - 1 if compact else self.take("h")
        if size < 0:
            return None
        self.at += size
        return self.data[self.at - size:self.at].decode()

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.at += self.uvarint()

    def fields(self, specs: list[dict], version: int, flexible: bool) -> dict:
        out: dict = {}
        for spec in specs:
            if not _in(spec["versions"], version) or "taggedVersions" in spec:
                continue
            kind = spec["type"]
            if kind.startswith("[]"):
                count = self.uvarint() - 1 if flexible else self.take("i")
                out[spec["name"]] = [self.fields(spec["fields"], version, flexible) for _ in range(count)]
            elif kind == "string":
                out[spec["name"]] = self.string(flexible)
            else:
                out[spec["name"]] = self.take({"bool": "?", "int16": "h", "int32": "i", "int64": "q"}[kind])
        if flexible:
            self.skip_tagged_fields()
        return out


def read_message(spec: dict, data: bytes, version: int) -> dict:
    reader = Reader(data)
    message = reader.fields(spec["fields"], version, _in(spec["flexibleVersions"], version))
    assert reader.at == len(data), f"{len(data) - reader.at} bytes left after {spec['name']} v{version}"
    return message


# -- the layouts themselves ----------------------------------------------------------------------

def test_the_kip_diff_is_the_seed_text():
    if SEED.exists():  # the vendored copy must not drift from the seed where both are present
        assert DIFF.read_text().rstrip("\n") in SEED.read_text()


def test_the_kips_layouts():
    request, response = kip_spec("DeleteRecordsRequest"), kip_spec("DeleteRecordsResponse")
    assert (request["validVersions"], request["flexibleVersions"]) == ("0-3", "2+")
    assert (response["validVersions"], response["flexibleVersions"]) == ("0-3", "2+")
    assert [(f["name"], f["type"], f["versions"], f.get("default")) for f in request["fields"]] == [
        ("Topics", "[]DeleteRecordsTopic", "0+", None), ("TimeoutMs", "int32", "0+", None),
        ("LeaderOnly", "bool", "3+", "false")]
    partition = response["fields"][1]["fields"][1]["fields"]
    assert [(f["name"], f["type"], f["versions"]) for f in partition] == [
        ("PartitionIndex", "int32", "0+"), ("LowWatermark", "int64", "0+"),
        ("LeaderLogStartOffset", "int64", "3+"), ("ErrorCode", "int16", "0+")]


@pytest.mark.parametrize("name", ["DeleteRecordsRequest", "DeleteRecordsResponse"])
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_our_specs_put_the_kips_fields_on_the_wire(name, version):
    from protocol.messages import MESSAGES

    ours = MESSAGES[name].spec
    theirs = _build_message(kip_spec(name), name)
    flexible = version >= 2
    assert wire_signature(ours.fields, version, flexible) == wire_signature(theirs.fields, version, flexible)


# -- bytes a real broker and our client exchange --------------------------------------------------

class RecordingProxy:
    """Forwards loopback TCP to the broker and keeps each direction's bytes per connection."""

    def __init__(self, port: int, upstream: int):
        self.port, self.upstream = port, upstream
        self.streams: list[tuple[bytearray, bytearray]] = []

    async def __aenter__(self) -> RecordingProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, client_reader, client_writer) -> None:
        broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        sent, received = bytearray(), bytearray()
        self.streams.append((sent, received))

        async def pipe(reader, writer, record):
            try:
                while data := await reader.read(65536):
                    record += data
                    writer.write(data)
                    await writer.drain()
            except ConnectionError:
                pass
            finally:
                writer.close()

        await asyncio.gather(pipe(client_reader, broker_writer, sent), pipe(broker_reader, client_writer, received))

    def exchanges(self, api_key: int) -> list[tuple[int, bytes, bytes]]:
        """(api_version, request body, response body) for every request of `api_key`, in order."""
        found = []
        for sent, received in self.streams:
            responses = {}
            for frame in _frames(received):
                responses[struct.unpack_from(">i", frame)[0]] = frame
            for frame in _frames(sent):
                key, version, correlation_id = struct.unpack_from(">hhi", frame)
                if key != api_key:
                    continue
                # request header v2: key, version, correlation id, client id (int16 length), tagged fields
                reader = Reader(frame)
                reader.at = 8
                reader.string(compact=False)
                reader.skip_tagged_fields()
                response = Reader(responses[correlation_id])
                response.at = 4
                response.skip_tagged_fields()  # response header v1 (DeleteRecords v3 is flexible)
                found.append((version, frame[reader.at:], response.data[response.at:]))
        return found


def _frames(stream: bytes) -> list[bytes]:
    frames, at = [], 0
    while at < len(stream):
        (size,) = struct.unpack_from(">i", stream, at)
        frames.append(bytes(stream[at + 4:at + 4 + size]))
        at += 4 + size
    return frames


@pytest.fixture
def proxied_broker(tmp_path):
    proxy_port = free_port()
    with BrokerProcess(tmp_path, {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"}) as broker:
        yield proxy_port, broker.port


async def test_broker_and_client_bytes_read_with_the_kips_layout(proxied_broker):
    proxy_port, broker_port = proxied_broker
    request_spec, response_spec = kip_spec("DeleteRecordsRequest"), kip_spec("DeleteRecordsResponse")
    async with RecordingProxy(proxy_port, broker_port) as proxy:
        async with Admin(f"127.0.0.1:{proxy_port}") as admin:
            await admin.create_topic("kip", num_partitions=2)
            async with Producer(admin.cluster, acks=-1) as producer:
                await producer.send_batches({("kip", p): [b"%d" % i for i in range(10)] for p in (0, 1)})
            await admin.delete_records({("kip", 0): 4}, leader_only=True, timeout_ms=5000)
            await admin.delete_records({("kip", 0): 6, ("kip", 1): -1}, timeout_ms=5000)
            await admin.delete_records({("kip", 1): 11}, leader_only=True, timeout_ms=5000)  # above the HW

    exchanges = proxy.exchanges(DELETE_RECORDS)
    assert [version for version, _, _ in exchanges] == [3, 3, 3]
    requests = [read_message(request_spec, body, 3) for _, body, _ in exchanges]
    responses = [read_message(response_spec, answer, 3) for _, _, answer in exchanges]

    def partitions(message, key):
        return sorted((t["Name"], *[p[k] for k in key]) for t in message["Topics"] for p in t["Partitions"])

    assert [(r["TimeoutMs"], r["LeaderOnly"]) for r in requests] == [(5000, True), (5000, False), (5000, True)]
    assert [partitions(r, ("PartitionIndex", "Offset")) for r in requests] == [
        [("kip", 0, 4)], [("kip", 0, 6), ("kip", 1, -1)], [("kip", 1, 11)]]

    result = ("PartitionIndex", "LowWatermark", "LeaderLogStartOffset", "ErrorCode")
    assert [partitions(r, result) for r in responses] == [
        [("kip", 0, 4, 4, 0)],
        [("kip", 0, 6, 6, 0), ("kip", 1, 10, 10, 0)],
        [("kip", 1, -1, -1, 1)],  # OFFSET_OUT_OF_RANGE: both offsets -1, as the KIP says for errors
    ]
