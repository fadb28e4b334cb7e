"""The fast paths produce exactly what the construct path produces: same values, same bytes."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import fastpath, framing
from protocol.errors import ProtocolError
from protocol.messages import FetchResponse, ProduceRequest

from .strategies import struct_of
from .test_fuzz import FRAMES, mutated

PRODUCE_FRAMES = [(d, e) for d, e in FRAMES if e["api_key"] == 0 and e["direction"] == "request"]

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("version", list(ProduceRequest.valid_versions))
@SETTINGS
@given(data=st.data())
def test_produce_decode_matches_construct_path(version, data):
    message = data.draw(struct_of(ProduceRequest, version))
    frame = framing.encode_request(message, version, 42, data.draw(st.none() | st.text(max_size=5)))[4:]
    slow = framing.decode_request(frame)
    fast = fastpath.decode_produce_request(frame)
    assert (fast.api_version, fast.correlation_id, fast.header) == (slow.api_version, 42, slow.header)
    assert fast.body == slow.body
    for topic in fast.body.topic_data:
        for partition in topic.partition_data:
            assert partition.records is None or isinstance(partition.records, memoryview)


@pytest.mark.parametrize("version", list(FetchResponse.valid_versions))
@SETTINGS
@given(data=st.data())
def test_fetch_encode_matches_construct_path(version, data):
    message = data.draw(struct_of(FetchResponse, version))
    chunks = fastpath.encode_fetch_response(message, version, 7)
    assert b"".join(chunks) == framing.encode_response(message, version, 7)


def test_produce_fast_path_reads_every_captured_produce():
    for data, _ in PRODUCE_FRAMES:
        assert fastpath.decode_produce_request(data).body == framing.decode_request(data).body


@settings(max_examples=300, deadline=None)
@given(mutated(PRODUCE_FRAMES))
def test_produce_fast_path_only_raises_the_typed_error(case):
    data, _ = case
    try:
        fastpath.decode_produce_request(data)
    except ProtocolError:
        pass
