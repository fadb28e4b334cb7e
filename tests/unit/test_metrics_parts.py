"""broker/metrics/ parts that need no broker: the histogram's buckets, the error walk over a
response, which retention rule a deletion is counted under, and rendering a scrape in steps."""

import asyncio
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

import broker.metrics.requests as request_metrics
from broker.log import TopicPartition
from broker.log.config import LogConfig
from broker.log.retention import SegmentFacts, retention_cause
from broker.metrics.histogram import Histogram
from broker.metrics.http import SAMPLES_PER_STEP, render
from broker.metrics.partitions import PARTITIONS_PER_STEP, PartitionCollector, PartitionView
from broker.metrics.requests import PHASES, RequestMetrics, count_errors
from protocol.errors import ErrorCode
from protocol.messages import ProduceResponse

NOW = 1_000_000
HOUR = 3_600_000
SEGMENTS = [SegmentFacts(10 * i, 100, NOW - (4 - i) * HOUR) for i in range(4)]


def test_histogram_buckets_are_inclusive_and_cumulative():
    histogram = Histogram((0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 1.0, 7.0):
        histogram.observe(value)
    assert histogram.cumulative() == [("0.1", 2), ("1.0", 4), ("+Inf", 5)]
    assert histogram.count == 5 and histogram.sum == 8.65


def test_batched_phase_times_fold_into_the_same_counts_and_sums_as_one_observe_each():
    stats = RequestMetrics().stats("Fetch")
    reference = [Histogram() for _ in PHASES]
    # on, below and above bounds, zero, and past the last bound (+Inf)
    values = [0.0005, 0.0004999, 0.00050001, 0.0, 0.3, 2.5, 31.0, 0.001, 1e-7, 10.0]
    for i in range(len(values)):
        queued, local, parked, sending = (values[(i + k) % len(values)] for k in range(4))
        if i % 3 == 0:
            parked = 100.0  # longer than the handler took: its remote time is the handler's whole time
        arrived = 0.0
        started = arrived + queued
        handled = started + local + min(parked, 50.0)
        sent = handled + sending
        stats.pending.append((arrived, started, handled, sent, parked))
        # each phase as one request's observe() would take it
        local_and_remote = handled - started
        remote = min(parked, local_and_remote)
        row = (started - arrived, local_and_remote - remote, remote, sent - handled, sent - arrived)
        for histogram, value in zip(reference, row, strict=True):
            histogram.observe(value)
    stats.fold()
    assert stats.pending == []
    for histogram, expected in zip(stats.phases, reference, strict=True):
        assert histogram.counts == expected.counts and histogram.sum == expected.sum  # added in the same order


def test_request_phase_times_are_folded_at_the_batch_size_and_at_every_scrape():
    metrics = RequestMetrics()
    for _ in range(request_metrics._FOLD_AT + 3):
        timing = metrics.begin("Fetch", arrived=0.0)
        timing.handled(None)
        timing.sent()
    stats = metrics.stats("Fetch")
    assert len(stats.pending) == 3 and stats.phases[4].count == request_metrics._FOLD_AT
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    scraped = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    total = {s.name: s.value for s in scraped["kafka_network_requestmetrics_totaltime_seconds"].samples}
    assert total["kafka_network_requestmetrics_totaltime_seconds_count"] == request_metrics._FOLD_AT + 3
    assert stats.pending == []


def test_every_error_code_in_a_response_is_counted_nested_ones_too():
    partition = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
    response = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
        partition(index=0, error_code=ErrorCode.NONE),
        partition(index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER),
        partition(index=2, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)])])
    counts: dict[int, int] = {}
    count_errors(response, counts)
    assert counts == {ErrorCode.NONE: 1, ErrorCode.NOT_LEADER_OR_FOLLOWER: 2}


@pytest.fixture(params=["compiled", "python"])
def two_level_count(request, monkeypatch):
    """Which loop counts a two-level answer: broker/metrics/_error_counts.c, or the Python one alone."""
    if request.param == "python":
        monkeypatch.setattr(request_metrics, "_compiled_count", None)
    else:
        from broker.metrics import _error_counts  # built by make test's `pip install -e .`

        assert request_metrics._compiled_count is _error_counts.count_two_levels
    return request.param


def test_a_two_level_answer_is_counted_as_the_generic_walk_counts_it(two_level_count):
    """Fetch and Produce answers (topics, then partitions) are counted without the generic walk's
    recursion: the same counts, top level included, empty topics and nested aborted lists too."""
    from broker.metrics.requests import _count_items, _two_levels
    from protocol.messages import FetchResponse

    topic, part = FetchResponse.FetchableTopicResponse, FetchResponse.FetchableTopicResponse.PartitionData
    aborted = [part.AbortedTransaction(producer_id=1, first_offset=0)]
    answers = [
        FetchResponse(error_code=ErrorCode.NONE, responses=[topic(topic="a", partitions=[
            part(partition_index=0), part(partition_index=1, error_code=ErrorCode.OFFSET_OUT_OF_RANGE),
            part(partition_index=2, aborted_transactions=aborted)]), topic(topic="b", partitions=[]),
            topic(topic="c", partitions=[part(partition_index=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)])]),
        FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, responses=[]),
        ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
            ProduceResponse.TopicProduceResponse.PartitionProduceResponse(index=0, error_code=ErrorCode.NONE)])]),
    ]
    assert _two_levels(FetchResponse) == (True, "responses", "partitions")
    assert _two_levels(ProduceResponse) == (False, "responses", "partition_responses")
    for answer in answers:
        flat: dict[int, int] = {}
        generic: dict[int, int] = {}
        count_errors(answer, flat)
        _count_items((answer,), generic)
        assert flat == generic and sum(generic.values()) > 0, answer


def _two_level_responses() -> list[type]:
    import protocol.messages as messages
    from broker.metrics.requests import _two_levels

    return [cls for name in dir(messages) if name.endswith("Response")
            and isinstance(cls := getattr(messages, name), type) and _two_levels(cls) is not None]


def test_about_twenty_response_types_are_counted_in_one_loop():
    assert len(_two_level_responses()) >= 20


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize("cls", _two_level_responses(), ids=lambda cls: cls.__name__)
@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_two_level_answer_is_counted_as_the_generic_walk_counts_it(cls, compiled, data):
    """Random answers of each response type the one-loop count takes (any version, empty and null
    arrays, any codes), counted by the compiled loop or the Python one: the generic walk's counts,
    and a null outer array is no error for either."""
    from broker.metrics.requests import _count_items, _two_levels
    from tests.protocol.strategies import struct_of

    version = data.draw(st.integers(cls.valid_versions.low, cls.valid_versions.high), label="version")
    answer = data.draw(struct_of(cls, version), label="answer")
    shape = _two_levels(cls)
    assert shape is not None
    if data.draw(st.booleans(), label="outer array null"):
        setattr(answer, shape[1], None)
    flat: dict[int, int] = {}
    generic: dict[int, int] = {}
    kept = request_metrics._compiled_count
    assert kept is not None  # built by make test's `pip install -e .`
    if not compiled:
        request_metrics._compiled_count = None
    try:
        count_errors(answer, flat)
    finally:
        request_metrics._compiled_count = kept
    _count_items((answer,), generic)
    assert flat == generic


def config(**overrides) -> LogConfig:
    return LogConfig.from_properties({"retention.ms": "-1", "retention.bytes": "-1", **overrides})


def cause(cfg: LogConfig, log_start_offset: int = 0) -> str | None:
    return retention_cause(SEGMENTS, cfg, log_start_offset=log_start_offset, high_watermark=40, log_end_offset=40,
                           now_ms=NOW)


def test_a_retention_deletion_is_counted_under_the_rule_that_deletes_most():
    assert cause(config()) is None
    assert cause(config(), log_start_offset=25) == "start_offset"
    assert cause(config(**{"retention.ms": str(int(2.5 * HOUR))})) == "retention_time"
    assert cause(config(**{"retention.bytes": "150"})) == "retention_size"
    assert cause(config(**{"retention.min.timestamp": str(NOW - 2 * HOUR - 1)})) == "retention_timestamp"
    # Time deletes one, size two: size it is; on a tie the earlier rule (time) is named.
    assert cause(config(**{"retention.ms": str(int(3.5 * HOUR)), "retention.bytes": "150"})) == "retention_size"
    assert cause(config(**{"retention.ms": str(int(2.5 * HOUR)), "retention.bytes": "150"})) == "retention_time"


class Families(Collector):
    """A collector of fixed families."""

    def __init__(self, *families: Metric) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return list(self.families)


def _registry(*families: Metric) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(Families(*families))
    return registry


async def test_a_scrape_is_rendered_in_steps_with_the_loop_free_between_them():
    big = GaugeMetricFamily("many", "one sample per partition", labels=["partition"])
    for index in range(3 * SAMPLES_PER_STEP + 7):
        big.add_metric([str(index)], index)
    small = CounterMetricFamily("few", "a counter", value=3)
    registry = _registry(big, small)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.get_running_loop().create_task(ticker())
    body = await render(registry)
    task.cancel()
    assert ticks >= 4  # the loop ran other work between the steps
    assert body == generate_latest(registry)  # the same text as in one go: one header per family
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert len(families["many"].samples) == 3 * SAMPLES_PER_STEP + 7


async def test_rendering_leaves_the_garbage_collector_as_it_found_it():
    import gc

    registry = _registry(CounterMetricFamily("few", "a counter", value=3))
    assert gc.isenabled()
    await render(registry)
    assert gc.isenabled()
    gc.disable()
    try:
        await render(registry)
        assert not gc.isenabled()
    finally:
        gc.enable()


@dataclass
class FakeLog:
    """What the partition gauges read of a PartitionLog (a LogView)."""

    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    erased_offset: int
    size_bytes: int = 10
    segments: list[int] = field(default_factory=lambda: [0])
    offline: bool = False


@dataclass
class FakeLogs:
    logs: dict[TopicPartition, FakeLog]
    offline_partitions: dict[TopicPartition, str] = field(default_factory=dict)


@dataclass
class NoReplicaState:
    """One broker that has used none of its partitions since start-up: no replica state."""

    partitions: dict[TopicPartition, PartitionView] = field(default_factory=dict)


async def test_the_partition_pass_pauses_and_still_renders_every_partition():
    count = 2 * PARTITIONS_PER_STEP + 1
    logs = {TopicPartition("t", i): FakeLog(log_start_offset=i, log_end_offset=i + 1, high_watermark=i + 1,
                                            erased_offset=i)
            for i in range(count)}
    collector = PartitionCollector(NoReplicaState(), FakeLogs(logs))
    assert sum(1 for family in collector.collect() if family is None) >= 5 * 2  # five per-log families
    body = await render(collector)
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    starts = families["kafka_log_log_logstartoffset"].samples
    assert len(starts) == count and starts[-1].value == count - 1
    assert families["kafka_server_replicamanager_partitioncount"].samples[0].value == count
