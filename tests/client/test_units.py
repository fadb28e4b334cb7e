"""Pure pieces of the client: bootstrap parsing, backoff, error types, result mapping, record decoding."""

import pytest

from client.admin import ConfigEntry, merge_for_alter_configs
from client.cluster import backoff_delay, parse_bootstrap
from client.consumer import decode_partition
from client.errors import (
    BootstrapError,
    BrokerConnectionError,
    BrokerUnreachableError,
    ConnectionClosedError,
    KafkaError,
    OffsetOutOfRangeError,
    RequestTimeoutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for,
    is_retriable,
)
from client.producer import to_new_record
from client.types import TopicPartition
from protocol.enums import ConfigResourceType, ConfigSource
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch

# -- bootstrap ---------------------------------------------------------------------------------------


def test_bootstrap_forms():
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["127.0.0.1:9092"]) == [("127.0.0.1", 9092)]
    assert parse_bootstrap("[::1]:9092") == [("::1", 9092)]


@pytest.mark.parametrize(("text", "problem"), [
    ("", "empty entry"),
    ("a:1,", "empty entry"),
    ("localhost", "is not host:port"),
    (":9092", "is not host:port"),
    ("a:0", "no valid port"),
    ("a:65536", "no valid port"),
    ("a:x", "no valid port"),
    ("::1:9092", "IPv6"),
])
def test_bad_bootstrap(text, problem):
    with pytest.raises(BootstrapError, match=problem) as info:
        parse_bootstrap(text)
    assert isinstance(info.value, ValueError)


def test_backoff_grows_to_its_cap_with_jitter():
    assert backoff_delay(0, 0.1, 1.0, jitter=lambda: 0.5) == pytest.approx(0.1)
    assert backoff_delay(3, 0.1, 1.0, jitter=lambda: 0.5) == pytest.approx(0.8)
    assert backoff_delay(10, 0.1, 1.0, jitter=lambda: 0.5) == pytest.approx(1.0)
    assert backoff_delay(10, 0.1, 1.0, jitter=lambda: 0.0) == pytest.approx(0.8)
    assert backoff_delay(10, 0.1, 1.0, jitter=lambda: 1.0) == pytest.approx(1.2)


# -- errors ------------------------------------------------------------------------------------------


def test_typed_errors_carry_codes_and_builtin_bases():
    assert isinstance(error_for(3), UnknownTopicOrPartitionError)
    assert isinstance(error_for(36, "exists"), TopicAlreadyExistsError)
    assert isinstance(error_for(35), UnsupportedVersionError)
    other = error_for(44, "compact topic")
    assert type(other) is KafkaError and other.error_code == ErrorCode.POLICY_VIOLATION
    assert str(other) == "POLICY_VIOLATION: compact topic"
    assert error_for(9999).error_code == ErrorCode.UNKNOWN_SERVER_ERROR

    closed = ConnectionClosedError("gone", host="h", port=1, request_sent=True)
    assert isinstance(closed, ConnectionError) and isinstance(closed, BrokerConnectionError)
    assert closed.error_code == ErrorCode.NETWORK_EXCEPTION and closed.request_sent
    assert isinstance(BrokerUnreachableError("x"), ConnectionError)
    assert isinstance(RequestTimeoutError("slow"), TimeoutError)
    assert RequestTimeoutError("slow").error_code == ErrorCode.REQUEST_TIMED_OUT

    out_of_range = OffsetOutOfRangeError("t", 0, 5)
    assert (out_of_range.topic, out_of_range.partition, out_of_range.offset) == ("t", 0, 5)
    assert out_of_range.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_retriable():
    assert is_retriable(error_for(ErrorCode.NOT_LEADER_OR_FOLLOWER))
    assert is_retriable(ConnectionClosedError("x"))
    assert is_retriable(RequestTimeoutError("x"))
    assert not is_retriable(error_for(ErrorCode.POLICY_VIOLATION))
    assert not is_retriable(ValueError())


# -- AlterConfigs fallback merge ---------------------------------------------------------------------


def test_legacy_alter_keeps_dynamic_values_only():
    current = {
        "retention.ms": ConfigEntry("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "cleanup.policy": ConfigEntry("cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
        "segment.bytes": ConfigEntry("segment.bytes", "4096", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "secret": ConfigEntry("secret", None, ConfigSource.DYNAMIC_TOPIC_CONFIG, is_sensitive=True),
        "broker.wide": ConfigEntry("broker.wide", "1", ConfigSource.STATIC_BROKER_CONFIG),
    }
    merged = merge_for_alter_configs(current, ConfigResourceType.TOPIC, "t", {"max.message.bytes": "10"},
                                     ["segment.bytes"])
    assert merged == {"retention.ms": "1000", "max.message.bytes": "10"}


def test_legacy_alter_broker_sources():
    current = {"a": ConfigEntry("a", "1", ConfigSource.DYNAMIC_BROKER_CONFIG),
               "b": ConfigEntry("b", "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)}
    assert merge_for_alter_configs(current, ConfigResourceType.BROKER, "1", {}, []) == {"a": "1"}
    assert merge_for_alter_configs(current, ConfigResourceType.BROKER, "", {}, []) == {"b": "2"}


# -- records -----------------------------------------------------------------------------------------


def _batch(base_offset, values, *, control=False):
    return build_batch([NewRecord(None, v, (), 1000 + i) for i, v in enumerate(values)],
                       base_offset=base_offset, is_control=control)


def test_decode_trims_below_the_position_and_skips_control_batches():
    tp = TopicPartition("t", 0)
    data = _batch(0, [b"a", b"b", b"c"]) + _batch(3, [b"ctl"], control=True) + _batch(4, [b"d", b"e"])
    records, position = decode_partition(tp, 1, data)
    assert [(r.offset, r.value) for r in records] == [(1, b"b"), (2, b"c"), (4, b"d"), (5, b"e")]
    assert position == 6
    assert records[0].topic == "t" and records[0].partition == 0 and records[0].timestamp == 1001


def test_decode_leaves_a_cut_batch_for_next_time():
    tp = TopicPartition("t", 0)
    first, second = _batch(0, [b"a"]), _batch(1, [b"b", b"c"])
    records, position = decode_partition(tp, 0, first + second[: len(second) - 3])
    assert [r.offset for r in records] == [0] and position == 1


def test_decode_empty():
    assert decode_partition(TopicPartition("t", 0), 7, None) == ([], 7)
    assert decode_partition(TopicPartition("t", 0), 7, b"") == ([], 7)


def test_record_shorthands():
    assert to_new_record(b"v", 5) == NewRecord(None, b"v", (), 5)
    assert to_new_record((b"k", b"v"), 5) == NewRecord(b"k", b"v", (), 5)
    assert to_new_record(NewRecord(b"k", b"v", (), 9), 5).timestamp == 9
    assert to_new_record(NewRecord(b"k", b"v"), 5).timestamp == 5
