"""protocol/_fetch_read.c and _fetch_write.c, the compiled Fetch request reader and answer writer, give
what their Python twins give (the same objects, the same bytes, the same chunks with the record data as
it was handed over), step aside for whatever the twins alone handle, and the Python twins serve alone
where they are not built. (tests/protocol/test_fetch_request.py's captured and damaged frames go
through the compiled reader too: decode_fetch_request tries it first.)"""

import struct
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import (  # built by make test's `pip install -e .`
    _fetch_read,
    _fetch_write,
    fastpath,
    fetch_request,
    framing,
)
from protocol.messages import FetchRequest, FetchResponse

from .strategies import struct_of
from .test_fetch_request import _as_a_consumer_sends, _outcome

SETTINGS = settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
_PartitionData = FetchResponse.FetchableTopicResponse.PartitionData


def test_the_compiled_codec_is_built_and_used():
    assert fetch_request._compiled is _fetch_read.decode
    assert fastpath._encode_fetch is _fetch_write.encode


@pytest.mark.parametrize("version", range(4, 17))
@SETTINGS
@given(data=st.data())
def test_a_consumers_request_is_read_in_c_as_in_python(version, data):
    message = _as_a_consumer_sends(data.draw(struct_of(FetchRequest, version)))
    frame = framing.encode_request(message, version, 42, data.draw(st.none() | st.text(max_size=5)))[4:]
    compiled = _fetch_read.decode(frame)
    python = fetch_request._decode(frame)
    if all(len(t.topic.encode()) < 127 and len(t.partitions) < 127 for t in message.topics) \
            and len(message.topics) < 127 and len(message.forgotten_topics_data) < 127 \
            and len(message.rack_id.encode()) < 127:  # what both read: short strings and arrays
        assert compiled is not None
    if compiled is not None:
        assert (compiled.api_key, compiled.api_version, compiled.correlation_id, compiled.header, compiled.body) \
            == (python.api_key, python.api_version, python.correlation_id, python.header, python.body)
    cut = data.draw(st.integers(0, len(frame)))  # a frame cut anywhere is left to Python, or read the same
    assert _outcome(fetch_request.decode_fetch_request, frame[:cut]) == _outcome(fetch_request.decode_in_python,
                                                                                  frame[:cut])


def test_the_reader_steps_aside_where_python_reads():
    frame = framing.encode_request(FetchRequest(topics=[FetchRequest.FetchTopic(
        topic="t", partitions=[FetchRequest.FetchTopic.FetchPartition(partition=0)])]), 11, 1, "c")[4:]
    assert _fetch_read.decode(frame) is not None
    assert _fetch_read.decode(frame[:-3]) is None  # cut short
    assert _fetch_read.decode(frame[:2] + b"\x00\x03" + frame[4:]) is None  # a version it does not read
    huge = bytearray(frame)
    huge[frame.index(b"\x00\x01t") - 4:frame.index(b"\x00\x01t")] = b"\x7f\xff\xff\xff"  # 2^31-1 topics
    assert _fetch_read.decode(bytes(huge)) is None
    bad_utf8 = frame.replace(b"\x00\x01c", b"\x00\x01\xff")  # the client id
    assert _fetch_read.decode(bad_utf8) is None


def _as_the_broker_answers(message: FetchResponse, version: int) -> FetchResponse:
    """No tagged field with a value: what a consumer's answer holds."""
    message.node_endpoints = []
    for topic in message.responses:
        for p in topic.partitions:
            p.diverging_epoch = _PartitionData.EpochEndOffset()
            p.current_leader = _PartitionData.LeaderIdAndEpoch()
            p.snapshot_id = _PartitionData.SnapshotId()
    return message


class _Region:
    """Record data the encoder must pass on untouched (a FileRegion stands in the real answers)."""

    def __init__(self, data: bytes):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)


def _same_chunks(compiled: list, python: list) -> None:
    assert len(compiled) == len(python)
    for a, b in zip(compiled, python, strict=True):
        if isinstance(b, bytearray):
            assert type(a) is bytearray and a == b
        else:
            assert a is b  # the record data itself, not a copy


@pytest.mark.parametrize("version", range(4, 17))
@SETTINGS
@given(data=st.data())
def test_an_answer_is_written_in_c_as_in_python(version, data):
    message = _as_the_broker_answers(data.draw(struct_of(FetchResponse, version)), version)
    for topic in message.responses:
        for p in topic.partitions:
            if p.records is not None and data.draw(st.booleans()):
                p.records = _Region(bytes(p.records))
    compiled = _fetch_write.encode(message, version, 7)
    python = fastpath.encode_fetch_response_in_python(message, version, 7)
    if all(len(t.topic.encode()) < 32768 for t in message.responses):
        assert compiled is not None
    if compiled is not None:
        _same_chunks(compiled, python)


@pytest.mark.parametrize("version", range(4, 17))
@SETTINGS
@given(data=st.data())
def test_an_answer_with_a_tagged_field_is_left_to_python(version, data):
    message = data.draw(struct_of(FetchResponse, version))
    compiled = _fetch_write.encode(message, version, 7)
    if compiled is not None:
        _same_chunks(compiled, fastpath.encode_fetch_response_in_python(message, version, 7))
    assert b"".join(bytes(c) if isinstance(c, _Region) else c for c in fastpath.encode_fetch_response(
        message, version, 7)) == framing.encode_response(message, version, 7)


def test_the_writer_steps_aside_where_python_writes():
    partition = _PartitionData(partition_index=0, records=b"x")
    message = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])])
    assert _fetch_write.encode(message, 11, 7) is not None
    assert _fetch_write.encode(message, 17, 7) is None  # a version it does not write
    partition.diverging_epoch = _PartitionData.EpochEndOffset(epoch=3, end_offset=9)
    assert _fetch_write.encode(message, 12, 7) is None  # a tagged field with a value
    assert _fetch_write.encode(message, 11, 7) is not None  # no tagged fields below v12
    partition.high_watermark = 2**63  # too large for its field: Python raises
    assert _fetch_write.encode(message, 11, 7) is None
    with pytest.raises(struct.error):
        fastpath.encode_fetch_response(message, 11, 7)


def test_without_the_compiled_codec_python_serves_alone():
    """A checkout without a C compiler: the same answers from the Python twins."""
    frame = framing.encode_request(FetchRequest(topics=[FetchRequest.FetchTopic(
        topic="t", partitions=[FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=5)])]), 11, 1,
        "c")[4:]
    partition = _PartitionData(partition_index=0, records=b"x")
    answer = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])])
    with mock.patch.object(fetch_request, "_compiled", None), mock.patch.object(fastpath, "_encode_fetch", None), \
            mock.patch.object(_fetch_read, "decode", side_effect=AssertionError), \
            mock.patch.object(_fetch_write, "encode", side_effect=AssertionError):
        request = fetch_request.decode_fetch_request(frame)
        chunks = fastpath.encode_fetch_response(answer, 11, 7)
    assert request.body == _fetch_read.decode(frame).body
    assert b"".join(chunks) == b"".join(_fetch_write.encode(answer, 11, 7))
