"""Headers and framing, checked against the byte examples in Kafka's protocol reference."""

import pytest

from protocol import framing
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

API_VERSIONS_V3_REQUEST = bytes.fromhex(
    "00000024" "00120003" "00000001" "0007" + b"rdkafka".hex() + "00"
    "0b" + b"librdkafka".hex() + "06" + b"2.3.0".hex() + "00"
)


def test_api_versions_v3_request_layout():
    request = framing.decode_request(API_VERSIONS_V3_REQUEST[4:])
    assert (request.api_key, request.api_version, request.correlation_id) == (18, 3, 1)
    assert request.header.client_id == "rdkafka"  # int16 length even in header v2
    assert request.body.client_software_name == "librdkafka"
    assert request.body.client_software_version == "2.3.0"
    assert framing.encode_request(request.body, 3, 1, "rdkafka") == API_VERSIONS_V3_REQUEST


def test_api_versions_v0_error_response_layout():
    body = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
    assert framing.encode_response(body, 0, 7) == bytes.fromhex(
        "00000010" "00000007" "0023" "00000001" "001200000004")


def test_api_versions_response_header_is_always_v0():
    body = ApiVersionsResponse(api_keys=[])
    frame = framing.encode_response(body, 3, 9)
    # size, correlation id, then straight into the flexible body: no header tagged-field byte
    assert frame[4:8] == b"\x00\x00\x00\x09"
    assert frame[8:10] == b"\x00\x00"  # error code
    assert framing.decode_response(frame[4:], 18, 3) == (9, body)


def test_flexible_response_header_has_tagged_fields():
    frame = framing.encode_response(framing.messages.MetadataResponse(), 12, 5)
    assert frame[4:9] == b"\x00\x00\x00\x05\x00"


def test_newer_api_versions_request_is_kept_without_body():
    frame = framing.encode_request(ApiVersionsRequest(), 4, 3, "c")
    raw = bytearray(frame[4:])
    raw[2:4] = (77).to_bytes(2, "big")
    request = framing.decode_request(bytes(raw))
    assert request.api_version == 77 and request.body is None and request.correlation_id == 3


def test_unsupported_version_of_other_apis_is_a_typed_error():
    raw = bytearray(framing.encode_request(MetadataRequest(topics=[]), 12, 1, "c")[4:])
    raw[2:4] = (99).to_bytes(2, "big")
    with pytest.raises(ProtocolError) as info:
        framing.decode_request(bytes(raw))
    assert info.value.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_unknown_api_key_is_a_typed_error():
    with pytest.raises(ProtocolError) as info:
        framing.decode_request(bytes.fromhex("0fff0000000000010000"))
    assert info.value.error_code == ErrorCode.INVALID_REQUEST


def test_null_client_id_reads_as_empty():
    frame = framing.encode_request(MetadataRequest(topics=None), 4, 2, None)
    assert framing.decode_request(frame[4:]).header.client_id == ""


def test_frame_decoder_splits_and_buffers():
    frames = [framing.frame(b"a" * n) for n in (0, 1, 300)]
    stream = b"".join(frames)
    decoder = framing.FrameDecoder()
    out = []
    for i in range(0, len(stream), 7):
        out += decoder.feed(stream[i:i + 7])
    assert out == [b"", b"a", b"a" * 300] and decoder.pending == 0


@pytest.mark.parametrize("size", [-1, -2**31, 1025])
def test_frame_decoder_rejects_bad_sizes(size):
    decoder = framing.FrameDecoder(max_frame=1024)
    with pytest.raises(ProtocolError):
        decoder.feed(size.to_bytes(4, "big", signed=True) + b"x")


def test_request_header_versions():
    header = framing.RequestHeader(request_api_key=7, request_api_version=0, correlation_id=5, client_id="x")
    with pytest.raises(ProtocolError):  # v0 has no client id, and it is not ignorable
        framing.RequestHeader[0].encode(header)
    bare = framing.RequestHeader(request_api_key=7, request_api_version=0, correlation_id=5)
    assert framing.RequestHeader[0].encode(bare) == bytes.fromhex("0007" "0000" "00000005")
    assert framing.RequestHeader[1].encode(header) == bytes.fromhex("0007000000000005" "0001") + b"x"
    assert framing.RequestHeader[2].encode(header) == bytes.fromhex("0007000000000005" "0001") + b"x" + b"\x00"
    assert framing.RequestHeader[0].decode(bytes.fromhex("000700000000000a")).client_id == ""


def test_trailing_bytes_after_a_request_are_ignored_as_kafka_does():
    # librdkafka 2.16's Metadata v13 "all topics" request, captured: 3 bytes follow the body.
    frame = bytes.fromhex("0003000d00000003000772646b61666b61" "00" "00000000" "010000")
    request = framing.decode_request(frame)
    assert request.body.topics is None and request.body.allow_auto_topic_creation is False
