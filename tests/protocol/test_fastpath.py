"""The fast paths produce exactly what the construct path produces: same values, same bytes."""

from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import fastpath, framing
from protocol.errors import ProtocolError
from protocol.messages import FetchResponse, ProduceRequest, ProduceResponse

from .strategies import struct_of
from .test_fuzz import FRAMES, mutated

PRODUCE_FRAMES = [(d, e) for d, e in FRAMES if e["api_key"] == 0 and e["direction"] == "request"]

SETTINGS = settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])


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


@pytest.mark.parametrize("version", list(FetchResponse.valid_versions))
@pytest.mark.parametrize("aborted", [None, [], [(5, 10), (6, 11)]])
@pytest.mark.parametrize("records", [None, b"", b"batch bytes"])
def test_fetch_encode_of_each_aborted_and_records_shape_matches_construct_path(version, aborted, records):
    """The shortcuts for a null or empty aborted list and a partition's record chunk, each shape."""
    data = FetchResponse.FetchableTopicResponse.PartitionData
    txns = None if aborted is None else [data.AbortedTransaction(producer_id=p, first_offset=o) for p, o in aborted]
    partitions = [data(partition_index=i, high_watermark=9, last_stable_offset=8, log_start_offset=1,
                       aborted_transactions=txns, records=records) for i in range(2)]
    topic = FetchResponse.FetchableTopicResponse(topic="t", partitions=partitions)
    message = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[topic])
    chunks = fastpath.encode_fetch_response(message, version, 7)
    assert b"".join(chunks) == framing.encode_response(message, version, 7)


@pytest.mark.parametrize("version", list(ProduceResponse.valid_versions))
@SETTINGS
@given(data=st.data())
def test_produce_encode_matches_construct_path(version, data):
    message = data.draw(struct_of(ProduceResponse, version))  # mostly the rare shapes: record errors, hints
    assert b"".join(fastpath.encode_produce_response(message, version, 7)) == framing.encode_response(
        message, version, 7)


_Topic = ProduceResponse.TopicProduceResponse
_Partition = _Topic.PartitionProduceResponse
_INT32 = st.integers(-2**31, 2**31 - 1)
_INT64 = st.integers(-2**63, 2**63 - 1)
# The shape of nearly every answer: offsets and an error code per partition, nothing else.
_USUAL_PARTITIONS = st.builds(_Partition, index=_INT32, error_code=st.integers(-1, 130), base_offset=_INT64,
                              log_append_time_ms=_INT64, log_start_offset=_INT64)
_USUAL_RESPONSES = st.builds(
    ProduceResponse, throttle_time_ms=_INT32,
    responses=st.lists(st.builds(_Topic, name=st.text(max_size=20),
                                 partition_responses=st.lists(_USUAL_PARTITIONS, max_size=4)), max_size=3))


@pytest.mark.parametrize("version", list(ProduceResponse.valid_versions))
@SETTINGS
@given(message=_USUAL_RESPONSES)
def test_produce_encode_of_the_usual_answer_matches_construct_path(version, message):
    expected = framing.encode_response(message, version, 7)
    if version < 13:  # packed by the fast paths themselves, the compiled one and the Python one
        with mock.patch.object(fastpath, "encode_response", side_effect=AssertionError("generic builder used")):
            with mock.patch.object(fastpath, "encode_produce_response_in_python",
                                   side_effect=AssertionError("Python encoder used")):
                assert b"".join(fastpath.encode_produce_response(message, version, 7)) == expected
            assert b"".join(fastpath.encode_produce_response_in_python(message, version, 7)) == expected
    else:
        assert b"".join(fastpath.encode_produce_response(message, version, 7)) == expected


def test_the_compiled_produce_writer_is_built_and_used():
    from protocol import _produce_write  # built by make test's `pip install -e .`

    assert fastpath._encode_produce is _produce_write.encode


_ODD_VALUES = st.one_of(st.integers(-2**70, 2**70), st.none(), st.text(max_size=3), st.just(1.5))


@pytest.mark.parametrize("version", list(ProduceResponse.valid_versions))
@SETTINGS
@given(data=st.data())
def test_compiled_produce_writer_matches_the_python_one_on_any_answer(version, data):
    """Rare shapes and values no field can hold (out of range, of the wrong type) included: the compiled
    writer steps aside for the Python one, which writes the answer or fails the same way."""
    message = data.draw(st.one_of(struct_of(ProduceResponse, version), _USUAL_RESPONSES))
    if data.draw(st.booleans()) and message.responses and message.responses[0].partition_responses:
        setattr(message.responses[0].partition_responses[0],
                data.draw(st.sampled_from(["index", "error_code", "base_offset", "log_start_offset"])),
                data.draw(_ODD_VALUES))
    with mock.patch.object(fastpath, "_encode_produce", None):
        python = _encoded(fastpath.encode_produce_response, message, version)
    assert _encoded(fastpath.encode_produce_response, message, version) == python


def _encoded(encode, message, version):
    try:
        return ("ok", b"".join(encode(message, version, 7)))
    except Exception as exc:  # whatever the Python encoder raises, the compiled path must raise too
        return ("error", type(exc))


def test_produce_fast_path_reads_every_captured_produce():
    for data, _ in PRODUCE_FRAMES:
        assert fastpath.decode_produce_request(data).body == framing.decode_request(data).body


def test_produce_fast_path_refuses_a_frame_that_ends_inside_a_varint():
    # v9 header, empty client id, then a tag count whose first byte says more bytes follow: none do
    with pytest.raises(ProtocolError):
        fastpath.decode_produce_request(b"\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x80")


@settings(max_examples=300)
@given(mutated(PRODUCE_FRAMES))
def test_produce_fast_path_only_raises_the_typed_error(case):
    data, _ = case
    try:
        fastpath.decode_produce_request(data)
    except ProtocolError:
        pass


def _decode_in_python(data):
    with mock.patch.object(fastpath, "_read_partitions", None):
        return fastpath.decode_produce_in_python(data)


def _partitions_in_c(data):
    """The Python decoder with the compiled partition reader under it (the path of every frame the compiled
    whole-request decoder leaves, v13 among them)."""
    return fastpath.decode_produce_in_python(data)


def _outcome(decode, data):
    try:
        request = decode(data)
    except ProtocolError as exc:
        return ("error", exc.error_code, str(exc))
    return ("ok", request.header, request.body)


def test_the_compiled_readers_are_built_and_used():
    from protocol import _produce_read  # built by make test's `pip install -e .`

    assert fastpath._read_partitions is _produce_read.read_partitions
    assert fastpath._compiled_decode is _produce_read.decode
    frame = framing.encode_request(ProduceRequest(acks=-1, timeout_ms=5, topic_data=[]), 9, 42, "c")[4:]
    with mock.patch.object(fastpath, "decode_produce_in_python", side_effect=AssertionError("Python decoder used")):
        assert fastpath.decode_produce_request(frame).correlation_id == 42


def _records_shared(request, frame) -> bool:
    """Every partition's records a view of the frame itself (the log stamps offsets into them in place)."""
    views = [p.records for t in request.body.topic_data for p in t.partition_data if p.records is not None]
    return all(isinstance(v, memoryview) and v.obj is frame for v in views)


@settings(max_examples=300)
@given(mutated(PRODUCE_FRAMES))
def test_compiled_readers_match_the_python_one_on_damaged_frames(case):
    data, _ = case
    python = _outcome(_decode_in_python, data)
    assert _outcome(fastpath.decode_produce_request, data) == python
    assert _outcome(_partitions_in_c, data) == python


@pytest.mark.parametrize("version", list(ProduceRequest.valid_versions))
@SETTINGS
@given(data=st.data())
def test_compiled_readers_match_the_python_one_on_generated_requests(version, data):
    message = data.draw(struct_of(ProduceRequest, version))
    frame = bytearray(framing.encode_request(message, version, 42, data.draw(st.none() | st.text(max_size=5)))[4:])
    cut = data.draw(st.integers(0, len(frame)))  # whole, or cut anywhere
    part = frame[:cut]
    python = _outcome(_decode_in_python, part)
    assert _outcome(fastpath.decode_produce_request, part) == python
    assert _outcome(_partitions_in_c, part) == python
    if python[0] == "ok":
        assert _records_shared(fastpath.decode_produce_request(part), part)


def test_compiled_partition_reader_steps_aside_on_bytes_that_do_not_fit():
    from protocol import _produce_read

    view = memoryview(b"\x7f\xff\xff\xff" + b"\0" * 20)  # a count of 2^31-1 partitions in 20 bytes
    assert _produce_read.read_partitions(view, 0, False, fastpath._PartitionData) is None
    view = memoryview(b"\x02" + b"\0\0\0\x05" + b"\x80\x80\x80\x80\x80\x01")  # a six-byte varint length
    assert _produce_read.read_partitions(view, 0, True, fastpath._PartitionData) is None
    view = memoryview(b"\x02" + b"\0\0\0\x05" + b"\x03ab" + b"\x00")  # one partition, records b"ab"
    partitions, end = _produce_read.read_partitions(view, 0, True, fastpath._PartitionData)
    assert (end, [(p.index, bytes(p.records)) for p in partitions]) == (9, [(5, b"ab")])
