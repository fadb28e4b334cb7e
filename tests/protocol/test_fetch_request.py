"""The hand-written Fetch request decoder builds exactly what the generic codec builds, and leaves
to the generic codec whatever it does not cover."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import fetch_request, framing
from protocol.errors import ProtocolError
from protocol.messages import FetchRequest

from .strategies import struct_of
from .test_fuzz import FRAMES, mutated

FETCH_FRAMES = [(d, e) for d, e in FRAMES if e["api_key"] == 1 and e["direction"] == "request"]
SETTINGS = settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
_Partition = FetchRequest.FetchTopic.FetchPartition


def _frame(message: FetchRequest, version: int, client_id: str | None) -> bytes:
    return framing.encode_request(message, version, 42, client_id)[4:]


def _outcome(decode, data: bytes):
    try:
        request = decode(data)
    except ProtocolError as exc:
        return ("error", exc.error_code, str(exc))
    return ("ok", request.api_key, request.api_version, request.correlation_id, request.header, request.body)


def _as_a_consumer_sends(message: FetchRequest) -> FetchRequest:
    """No tagged fields: what librdkafka and the Java consumer send."""
    message.cluster_id = None
    message.replica_state = FetchRequest.ReplicaState()
    for topic in message.topics:
        for p in topic.partitions:
            p.replica_directory_id = _Partition().replica_directory_id
            p.high_watermark = _Partition().high_watermark
    return message


@pytest.mark.parametrize("version", list(FetchRequest.valid_versions))
@SETTINGS
@given(data=st.data())
def test_decode_matches_the_generic_codec(version, data):
    """Any valid request, tagged fields included (those take the generic codec)."""
    frame = _frame(data.draw(struct_of(FetchRequest, version)), version, data.draw(st.none() | st.text(max_size=5)))
    assert _outcome(fetch_request.decode_fetch_request, frame) == _outcome(framing.decode_request, frame)


@pytest.mark.parametrize("version", range(4, 17))
@SETTINGS
@given(data=st.data())
def test_a_consumers_request_is_read_by_the_fast_path(version, data):
    message = _as_a_consumer_sends(data.draw(struct_of(FetchRequest, version)))
    frame = _frame(message, version, data.draw(st.none() | st.text(max_size=5)))
    fast = fetch_request._decode(frame)  # raises _Unusual if it would fall back
    slow = framing.decode_request(frame)
    assert (fast.api_key, fast.api_version, fast.correlation_id, fast.header) == \
        (slow.api_key, slow.api_version, 42, slow.header)
    assert fast.body == slow.body


def test_captured_fetch_requests():
    assert FETCH_FRAMES
    for data, _ in FETCH_FRAMES:
        assert _outcome(fetch_request.decode_fetch_request, data) == _outcome(framing.decode_request, data)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(FETCH_FRAMES))
def test_damaged_frames_get_what_the_generic_codec_gives(case):
    data, _ = case
    assert _outcome(fetch_request.decode_fetch_request, data) == _outcome(framing.decode_request, data)


def test_a_follower_with_replica_state_takes_the_generic_codec():
    message = FetchRequest(replica_state=FetchRequest.ReplicaState(replica_id=2, replica_epoch=7), max_wait_ms=500,
                           topics=[FetchRequest.FetchTopic(partitions=[_Partition(partition=0, fetch_offset=9)])])
    frame = _frame(message, 16, "follower")
    with pytest.raises(fetch_request._Unusual):
        fetch_request._decode(frame)
    assert fetch_request.decode_fetch_request(frame).body.replica_state.replica_id == 2
