"""Decoding garbage never raises anything but ProtocolError: random frames, and real frames with
bytes flipped, inserted, cut or deleted."""

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import framing
from protocol.errors import ProtocolError
from protocol.messages import APIS, MESSAGES

GOLDEN = Path(__file__).parent / "golden"
ENTRIES = [e for e in json.loads((GOLDEN / "MANIFEST.json").read_text()) if e["api_key"] in APIS]
FRAMES = [((GOLDEN / e["file"]).read_bytes(), e) for e in ENTRIES]
CODECS = [(name, v) for name, cls in sorted(MESSAGES.items()) for v in cls.valid_versions]

FUZZ = settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])


def _decode(data: bytes, entry) -> None:
    try:
        if entry["direction"] == "request":
            framing.decode_request(data)
        else:
            framing.decode_response(data, entry["api_key"], entry["api_version"])
    except ProtocolError:
        pass


@st.composite
def mutated(draw, frames=FRAMES):
    data, entry = draw(st.sampled_from(frames))
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[pos] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[pos:pos + draw(st.integers(1, 8))]
        else:
            del data[pos:]
    return bytes(data), entry


@FUZZ
@given(mutated())
def test_mutated_real_frames(case):
    _decode(*case)


@FUZZ
@given(st.binary(max_size=64), st.sampled_from(sorted(APIS)), st.integers(-1, 20))
def test_random_request_frames(tail, api_key, version):
    head = api_key.to_bytes(2, "big") + version.to_bytes(2, "big", signed=True) + b"\x00\x00\x00\x01"
    _decode(head + tail, {"direction": "request"})


@settings(max_examples=1500)
@given(st.sampled_from(CODECS), st.binary(max_size=48))
def test_random_bodies_for_every_codec(case, data):
    name, version = case
    try:
        MESSAGES[name][version].decode(data)
    except ProtocolError:
        pass
