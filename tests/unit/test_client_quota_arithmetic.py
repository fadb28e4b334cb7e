"""Client quotas' arithmetic against Kafka 4.3.1's, worked by hand from its Rate, SampledStat and
QuotaUtils (quota.window.num 11, quota.window.size.seconds 1 unless a test says otherwise), KIP-55's
precedence of quota entities, and the checks of AlterClientQuotas' values."""

from __future__ import annotations

import asyncio

import pytest

from broker.quotas.entities import (
    IP_KEYS,
    USER_AND_CLIENT_KEYS,
    QuotaError,
    check_entity,
    check_value,
    java_double,
    value_text,
)
from broker.quotas.manager import DEFAULT, ClientSensor, QuotaManager, user_of
from broker.quotas.rate import SampledRate, java_round, record_and_throttle_ms


def test_a_new_client_is_measured_over_at_least_num_minus_one_windows():
    rate = SampledRate(11, 1000)
    rate.record(5000, 0)
    # 0 ms elapsed, taken as 10 full windows: 5000 B / 10 s
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == 500.0


def test_the_throttle_brings_the_rate_back_to_the_bound():
    rate = SampledRate(11, 1000)
    assert record_and_throttle_ms(rate, 1000.0, 5000, 0) == 0  # 500 B/s
    # 15000 B over 10 s = 1500 B/s; X = (1500 - 1000) / 1000 * 10000 ms
    assert record_and_throttle_ms(rate, 1000.0, 10_000, 0) == 5000


def test_the_window_grows_past_its_minimum_with_the_oldest_sample():
    rate = SampledRate(11, 1000)
    rate.record(1000, 0)
    rate.record(1000, 12_500)  # the first sample is more than 11 windows old: reset, not counted
    assert rate.measure(12_500) == 100.0  # 1000 B over the minimum 10 s
    rate.record(24_000, 23_000)
    # samples start at 12500 (1000 B) and 23000 (24000 B): 10500 ms, 10 full windows
    assert rate.window_size_ms(23_000) == 10_500
    assert rate.measure(23_000) == pytest.approx(25_000 / 10.5)


def test_a_steady_client_fills_eleven_samples_over_ten_seconds():
    """1000 B every second: 12 samples in the ring, the 11-window-old one counts nothing, so the rate
    at a record is 11 samples over the 10 s since the oldest kept one started (Kafka overestimates a
    steady rate by a tenth at the moment it records)."""
    rate = SampledRate(11, 1000)
    for second in range(20):
        rate.record(1000, second * 1000)
    assert len(rate.samples) == 12
    assert rate.measure(19_000) == pytest.approx(1100.0)


def test_a_small_window_count():
    rate = SampledRate(2, 1000)
    assert record_and_throttle_ms(rate, 100.0, 300, 0) == 2000  # 300 B/s over 1 s: (300-100)/100*1000
    assert record_and_throttle_ms(rate, 100.0, 0, 1500) == 1500  # 300 B over 1.5 s: (200-100)/100 * 1500


def test_the_request_quota_caps_the_throttle_at_one_window():
    rate = SampledRate(11, 1000)
    assert record_and_throttle_ms(rate, 1.0, 1000, 0, cap_ms=1000) == 1000


def test_throttle_times_round_as_java_does():
    assert [java_round(x) for x in (0.5, 1.5, 2.4999, -0.5)] == [1, 2, 2, 0]


def _manager(**quotas: float) -> QuotaManager:
    """Quotas by entity keyed 'user__client' ('D' for the default, '-' for absent)."""
    manager = QuotaManager("producer_byte_rate", 11, 1000, ClientSensor)
    entities = {}
    for key, value in quotas.items():
        user, client = key.split("__")
        pairs = {}
        if user != "-":
            pairs["user"] = None if user == "D" else user
        if client != "-":
            pairs["client-id"] = None if client == "D" else client
        entities[tuple(sorted(pairs.items()))] = {"producer_byte_rate": value}
    manager.update(entities)
    return manager


@pytest.mark.parametrize("configured, expected", [
    ({"alice__c1": 1, "alice__D": 2, "alice__-": 3, "D__c1": 4, "D__D": 5, "D__-": 6, "-__c1": 7, "-__D": 8}, 1),
    ({"alice__D": 2, "alice__-": 3, "D__c1": 4, "D__D": 5, "D__-": 6, "-__c1": 7, "-__D": 8}, 2),
    ({"alice__-": 3, "D__c1": 4, "D__D": 5, "D__-": 6, "-__c1": 7, "-__D": 8}, 3),
    ({"D__c1": 4, "D__D": 5, "D__-": 6, "-__c1": 7, "-__D": 8}, 4),
    ({"D__D": 5, "D__-": 6, "-__c1": 7, "-__D": 8}, 5),
    ({"D__-": 6, "-__c1": 7, "-__D": 8}, 6),
    ({"-__c1": 7, "-__D": 8}, 7),
    ({"-__D": 8}, 8),
    ({"bob__-": 9, "-__other": 10}, None),
])
def test_kip_55_precedence(configured, expected):
    manager = _manager(**configured)
    assert manager.enabled
    assert manager.quota("alice", "c1") == expected


def test_no_quota_of_the_key_leaves_the_manager_off():
    manager = QuotaManager("consumer_byte_rate", 11, 1000, ClientSensor)
    manager.update({(("user", "alice"),): {"producer_byte_rate": 10.0}})
    assert not manager.enabled and manager.quota("alice", "c1") is None
    assert manager.record("alice", "c1", 10**9, 0) == 0


def test_clients_of_one_user_quota_share_its_rate():
    manager = _manager(**{"alice__-": 1000.0})
    assert manager.record("alice", "a", 8000, 0) == 0  # 800 B/s
    assert manager.record("alice", "b", 4000, 0) == 2000  # the same rate: 1200 B/s
    assert manager.record("bob", "a", 10**6, 0) == 0  # bob has no quota


def test_clients_under_a_default_client_quota_have_a_rate_each():
    manager = _manager(**{"-__D": 1000.0})
    assert manager.record("ANONYMOUS", "a", 8000, 0) == 0
    assert manager.record("ANONYMOUS", "b", 8000, 0) == 0  # its own rate: 800 B/s
    assert manager.record("ANONYMOUS", "a", 4000, 0) == 2000


def test_a_changed_quota_keeps_the_rate_measured():
    manager = _manager(**{"-__c": 1000.0})
    assert manager.record("u", "c", 8000, 0) == 0
    manager.update({(("client-id", "c"),): {"producer_byte_rate": 400.0}})
    assert manager.record("u", "c", 0, 0) == 10_000  # 800 B/s against 400: (800-400)/400 * 10 s


def test_the_user_of_a_principal():
    assert (user_of("User:alice"), user_of("User:ANONYMOUS"), user_of("User:a:b")) == ("alice", "ANONYMOUS", "a:b")
    assert DEFAULT not in ("", "<default>")


@pytest.mark.parametrize("key, value, says", [
    ("producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
    ("producer_byte_rate", -1.0, "must be greater than 0"),
    ("producer_byte_rate", 1.5, "producer_byte_rate cannot be a fractional value."),
    ("consumer_byte_rate", 1e19, "Proposed value for consumer_byte_rate is too large for a LONG."),
    ("bogus", 1.0, "Invalid configuration key bogus"),
    ("connection_creation_rate", 1.0, "Invalid configuration key connection_creation_rate"),
])
def test_values_refused_for_users_and_clients(key, value, says):
    with pytest.raises(QuotaError, match=says):
        check_value(USER_AND_CLIENT_KEYS, key, value)


def test_nan_is_taken_and_holds_nobody_back():
    """Kafka's checks compare as Java does, so NaN passes them all; its throttle time rounds to 0."""
    nan = float("nan")
    check_value(USER_AND_CLIENT_KEYS, "producer_byte_rate", nan)
    check_value(IP_KEYS, "connection_creation_rate", nan)
    assert value_text("producer_byte_rate", nan) == "NaN"
    assert record_and_throttle_ms(SampledRate(11, 1000), nan, 10**9, 0) == 0


def test_values_taken():
    check_value(USER_AND_CLIENT_KEYS, "producer_byte_rate", 1024.0000001)  # within 1e-6 of whole
    check_value(USER_AND_CLIENT_KEYS, "request_percentage", 0.5)
    check_value(IP_KEYS, "connection_creation_rate", 2147483647.0)
    with pytest.raises(QuotaError, match="too large for an INT"):
        check_value(IP_KEYS, "connection_creation_rate", 2147483648.0)


@pytest.mark.parametrize("entity, says", [
    ((), "Invalid empty client quota entity"),
    ((("group", "g"),), "Unhandled client quota entity type: group"),
    ((("user", ""),), "Empty user not supported"),
    ((("ip", "1.2.3.4"), ("user", "a")), "IP entity shouldnot be combined"),
    ((("ip", "not a host name"),), "not a valid IP or resolvable host"),
])
def test_entities_refused(entity, says):
    with pytest.raises(QuotaError, match=says):
        asyncio.run(check_entity(entity))


def test_entities_taken():
    assert asyncio.run(check_entity((("client-id", None), ("user", "a")))) is USER_AND_CLIENT_KEYS
    assert asyncio.run(check_entity((("ip", "::1"),))) is IP_KEYS
    assert asyncio.run(check_entity((("ip", None),))) is IP_KEYS


def test_stored_text_is_what_kafka_wrote():
    assert value_text("producer_byte_rate", 1024.0) == "1024"
    assert value_text("request_percentage", 12.5) == "12.5"
    assert [java_double(v) for v in (1e7, 200.0, 1.5e10, 1e-4)] == ["1.0E7", "200.0", "1.5E10", "1.0E-4"]


def test_a_throttled_fetch_takes_its_bytes_back():
    manager = _manager(**{"-__c": 1000.0})
    assert manager.record("u", "c", 8000, 0) == 0
    assert manager.record("u", "c", 4000, 0) == 2000  # 1200 B/s
    manager.unrecord("u", "c", 4000, 0)  # the answer went out empty
    assert manager.record("u", "c", 0, 0) == 0  # 800 B/s again


def test_a_consumer_fetches_no_more_than_its_quota_window_holds():
    manager = _manager(**{"-__c": 1000.0})
    assert manager.max_value_in_window("u", "c") == 10_000  # 1000 B/s over num - 1 = 10 windows of 1 s
    assert manager.max_value_in_window("u", "other") is None


def test_connection_rates_per_address():
    from broker.quotas.connections import ConnectionRateQuotas

    quotas = ConnectionRateQuotas(11, 1000)
    quotas.update({(("ip", None),): {"connection_creation_rate": 1.0},
                   (("ip", "10.0.0.1"),): {"connection_creation_rate": 3.0},
                   (("user", "u"),): {"producer_byte_rate": 5.0}})
    assert quotas.enabled
    assert [quotas.admit("10.0.0.2", 0) for _ in range(11)] == [0] * 10 + [1000]  # 1.1/s over 10 s: capped
    assert quotas.admit("10.0.0.2", 0) == 1000  # the refused one was taken back, not counted
    assert all(quotas.admit("::ffff:10.0.0.1", 0) == 0 for _ in range(30))  # its own quota, one spelling
    assert quotas.admit("10.0.0.1", 0) == 333  # 31 over 10 s against 3: (3.1 - 3) / 3 * 10 s
    quotas.update({})
    assert not quotas.enabled and quotas.admit("10.0.0.2", 0) == 0


def test_a_throttle_saturates_at_the_answer_field_int32():
    """A tiny quota against a large request: the throttle would overflow throttle_time_ms."""
    assert record_and_throttle_ms(SampledRate(11, 1000), 1.0, 50 * 10**6, 0) == 2**31 - 1


def test_a_nan_consumer_quota_caps_a_fetch_at_nothing_without_failing():
    """Kafka's toInt of NaN is 0: the Fetch asks for no bytes (one batch is still served), no crash."""
    from broker.quotas.manager import cap_fetch
    from broker.request_context import RequestContext
    from protocol.messages import FetchRequest

    manager = _manager(**{"-__c": float("nan")})
    body = FetchRequest(max_bytes=50 * 2**20, min_bytes=1)
    cap_fetch(manager, RequestContext(), "c", body)
    assert (body.max_bytes, body.min_bytes) == (0, 0)


def test_sweeping_forgets_the_bounds_of_clients_gone():
    manager = _manager(**{"alice__-": 1000.0})
    for client in range(100):
        manager.record("alice", f"task-{client}", 1, 0)
    manager.record("alice", "last", 1, 10**9)  # far later: the sweep runs first
    assert manager.cached_bounds == 1
