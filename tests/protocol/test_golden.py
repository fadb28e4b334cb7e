"""Frames captured from real clients (tests/protocol/golden/) decode to the expected values and
re-encode to the very same bytes."""

import json
from pathlib import Path

import pytest

from protocol import framing, messages
from protocol.errors import ErrorCode, ProtocolError
from protocol.records import iter_batches

GOLDEN = Path(__file__).parent / "golden"
MANIFEST = json.loads((GOLDEN / "MANIFEST.json").read_text())
SERVED = [e for e in MANIFEST if e["api_key"] in messages.APIS]
NOT_OURS = [e for e in MANIFEST if e["api_key"] not in messages.APIS and e["direction"] == "request"]


def _frame(entry) -> bytes:
    return (GOLDEN / entry["file"]).read_bytes()


def test_every_api_in_the_client_matrix_was_captured():
    captured = {e["api_name"] for e in SERVED}
    for name in ("ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "DeleteRecords"):
        assert name in captured
    assert {e["client"] for e in SERVED} == {"confluent-kafka", "kafka-python", "aiokafka", "kafkajs"}


@pytest.mark.parametrize("entry", [e for e in SERVED if e["direction"] == "request"], ids=lambda e: e["file"])
def test_request_decodes_and_reencodes_identically(entry):
    data = _frame(entry)
    request = framing.decode_request(data)
    assert (request.api_key, request.api_version) == (entry["api_key"], entry["api_version"])
    assert request.correlation_id == entry["correlation_id"]
    assert request.header.client_id.startswith(("golden", "rdkafka", "kafka", "aiokafka", "kafkajs"))
    encoded = framing.encode_request(request.body, request.api_version, request.correlation_id,
                                     request.header.client_id)
    assert encoded[4:] == data
    CHECKS.get(entry["api_name"], lambda body, e: None)(request.body, entry)


@pytest.mark.parametrize("entry", [e for e in SERVED if e["direction"] == "response"], ids=lambda e: e["file"])
def test_response_decodes_and_reencodes(entry):
    """Responses come from the peer broker (Tansu), which writes some tagged fields even when they hold
    their default; Kafka and we leave those out. So: same values always, same bytes otherwise."""
    data = _frame(entry)
    correlation_id, body = framing.decode_response(data, entry["api_key"], entry["api_version"])
    assert correlation_id == entry["correlation_id"]
    encoded = framing.encode_response(body, entry["api_version"], correlation_id)[4:]
    assert framing.decode_response(encoded, entry["api_key"], entry["api_version"]) == (correlation_id, body)
    if entry["file"] not in TANSU_WRITES_DEFAULT_TAGS:
        assert encoded == data
    if entry["api_name"] == "Fetch":
        records = [p.records for t in body.responses for p in t.partitions if p.records]
        assert records, "the captured fetch carries record data"
        for data in records:
            for batch in iter_batches(data, allow_partial_tail=True):
                batch.validate()
                assert len(list(batch.records())) == batch.records_count


TANSU_WRITES_DEFAULT_TAGS = {
    "confluent-kafka/001-18-ApiVersions-v3-response.bin",  # FinalizedFeaturesEpoch=-1 written
    "kafka-python/001-18-ApiVersions-v4-response.bin",
    "kafka-python/003-19-CreateTopics-v7-response.bin",  # TopicConfigErrorCode=0 written
    "confluent-kafka/017-1-Fetch-v16-response.bin",  # CurrentLeader {-1, -1} written
}


@pytest.mark.parametrize("entry", NOT_OURS, ids=lambda e: e["file"])
def test_apis_we_do_not_serve_are_refused_with_the_typed_error(entry):
    with pytest.raises(ProtocolError) as info:
        framing.decode_request(_frame(entry))
    assert info.value.error_code == ErrorCode.INVALID_REQUEST


# --- what the decoded values must say, per API -----------------------------------------------------

def _check_api_versions(body, entry):
    if entry["api_version"] >= 3:
        assert body.client_software_name and body.client_software_version


def _check_produce(body, entry):
    assert body.acks in (-1, 1)
    assert entry["note"].startswith(f"acks={body.acks} ")
    for topic in body.topic_data:
        assert topic.name.startswith("golden")
        for partition in topic.partition_data:
            batches = list(iter_batches(partition.records))
            assert batches
            for batch in batches:
                batch.validate()  # CRC-32C and header sanity
                assert len(list(batch.records())) == batch.records_count > 0
            codec = entry["note"].split("compression=")[-1]
            assert batches[0].compression.name.lower() == codec


def _check_delete_records(body, entry):
    assert body.topics and body.timeout_ms > 0
    for topic in body.topics:
        assert all(p.offset >= 0 for p in topic.partitions)


def _check_metadata(body, entry):
    if entry["api_version"] >= 4:
        assert isinstance(body.allow_auto_topic_creation, bool)


def _check_list_offsets(body, entry):
    assert body.replica_id == -1
    for topic in body.topics:
        assert all(p.timestamp in (-1, -2) or p.timestamp > 0 for p in topic.partitions)


def _check_fetch(body, entry):
    assert body.max_wait_ms > 0
    assert all(p.fetch_offset >= 0 for t in body.topics for p in t.partitions)


CHECKS = {
    "ApiVersions": _check_api_versions, "Produce": _check_produce, "DeleteRecords": _check_delete_records,
    "Metadata": _check_metadata, "ListOffsets": _check_list_offsets, "Fetch": _check_fetch,
}
