"""Prometheus metrics (broker/metrics/): one real broker process with `ebb.metrics.listener` set,
scraped over HTTP and parsed with prometheus_client's text parser; values move when they should."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from broker.config import ConfigError, build_config
from protocol.errors import ErrorCode
from tests.broker.data_wire import batch, create_topic, delete_records, fetch, produce
from tests.support.broker_process import free_port
from tests.support.metrics_scrape import scrape, series_names, value
from tests.support.polling import wait_for

METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    # Retention runs every half second, so that a deletion by retention.ms shows within the test.
    return {"ebb.metrics.listener": f"http://127.0.0.1:{METRICS_PORT}", "log.retention.check.interval.ms": "500",
            "log.initial.task.delay.ms": "0", "log.cleaner.backoff.ms": "200",
            # A key map of 20 slots (140 bytes a key), so that a round over two keys fills a tenth of it.
            "log.cleaner.dedupe.buffer.size": "2800",
            # Ebb-only: tiny segments (a batch or two each) so that retention has segments to delete.
            "ebb.testing.small.segments.enable": "true"}


@pytest.fixture
def url(broker) -> str:
    return f"http://127.0.0.1:{METRICS_PORT}/metrics"


def test_produce_moves_bytes_in_the_watermarks_and_the_request_metrics(url, client):
    create_topic(client, "metered")
    before = scrape(url)
    data = batch([b"a", b"bb", b"ccc"])
    assert produce(client, "metered", 0, data).error_code == ErrorCode.NONE
    after = scrape(url)
    topic = {"topic": "metered"}
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total", **topic) == len(data)
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", **topic) == 3
    partition = {"topic": "metered", "partition": "0"}
    assert value(after, "ebb_partition_highwatermark", **partition) == 3
    assert value(after, "kafka_log_log_logendoffset", **partition) == 3
    assert value(after, "kafka_log_log_logstartoffset", **partition) == 0
    assert value(after, "kafka_log_log_size", **partition) == len(data)
    assert value(after, "kafka_log_log_numlogsegments", **partition) == 1
    assert value(after, "ebb_partition_leader", **partition) == 1
    assert value(after, "kafka_cluster_partition_underreplicated", **partition) == 0
    produce_requests = {"request": "Produce"}
    assert value(after, "kafka_network_requestmetrics_requests_total", **produce_requests) == \
        (value(before, "kafka_network_requestmetrics_requests_total", **produce_requests) or 0) + 1
    assert value(after, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") >= 1
    assert value(after, "kafka_network_requestmetrics_totaltime_seconds_count", **produce_requests) >= 1
    assert value(after, "kafka_server_socketservermetrics_connection_count") >= 1
    # The JMX exporter's name for Kafka's per-listener, per-processor count (issue 27)
    assert value(after, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT",
                 networkProcessor="0") == value(after, "kafka_server_socketservermetrics_connection_count")
    assert value(after, "ebb_log_open_segment_files_max") == 4096
    assert 1 <= value(after, "ebb_log_open_segment_files") <= 4096
    assert value(after, "ebb_log_segment_reopens_total") == 0


def test_a_long_poll_that_times_out_counts_as_a_fetch_expiration_with_remote_time(url, client):
    create_topic(client, "quiet")
    before = scrape(url)
    answer = fetch(client, "quiet", 0, 0, max_wait_ms=300, min_bytes=1024 * 1024)
    assert answer.error_code == ErrorCode.NONE
    after = scrape(url)
    fetches = {"delayedOperation": "Fetch"}
    assert value(after, "ebb_purgatory_expirations_total", **fetches) == \
        value(before, "ebb_purgatory_expirations_total", **fetches) + 1
    assert value(after, "kafka_server_delayedoperationpurgatory_numdelayedoperations", **fetches) == 0
    remote = "kafka_network_requestmetrics_remotetime_seconds_sum"
    # The wait is the request's remote time: at least most of the 300 ms it was parked.
    assert value(after, remote, request="Fetch") - (value(before, remote, request="Fetch") or 0) >= 0.2


def test_delete_records_counts_what_it_deleted_and_its_latency_by_mode(url, client):
    create_topic(client, "trimmed", configs={"segment.bytes": "100"})  # about one batch per segment
    for i in range(10):
        assert produce(client, "trimmed", 0, batch([b"v%d" % i])).error_code == ErrorCode.NONE
    before = scrape(url)
    assert delete_records(client, "trimmed", 0, 6).error_code == ErrorCode.NONE
    assert delete_records(client, "trimmed", 0, 8, version=3, leader_only=True).error_code == ErrorCode.NONE
    after = scrape(url)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - (value(before, name, **labels) or 0)

    assert grew("ebb_log_deleted_records_total", cause="delete_records") == 8
    size = "kafka_log_log_size"
    assert grew("ebb_log_deleted_bytes_total", cause="delete_records") == \
        value(before, size, topic="trimmed", partition="0") - value(after, size, topic="trimmed", partition="0") > 0
    assert grew("ebb_delete_records_latency_seconds_count", mode="all_replicas") == 1
    assert grew("ebb_delete_records_latency_seconds_count", mode="leader_only") == 1
    assert value(after, "kafka_log_log_logstartoffset", topic="trimmed", partition="0") == 8
    assert value(after, "ebb_partition_lowwatermark", topic="trimmed", partition="0") == 8
    assert grew("kafka_network_requestmetrics_errors_total", request="DeleteRecords", error="NONE") == 2


def test_retention_by_time_counts_its_deletions_under_its_own_cause(url, client):
    before = scrape(url)
    create_topic(client, "expiring", configs={"segment.bytes": "100", "retention.ms": "60000"})
    for i in range(4):
        assert produce(client, "expiring", 0, batch([b"e%d" % i])).error_code == ErrorCode.NONE
    size = value(scrape(url), "kafka_log_log_size", topic="expiring", partition="0")
    # Now every record is older than retention.ms allows (records carry their create time: zero here
    # would be 1970, so a minute is plenty): retention deletes them all, rolling a new active segment.
    client.request(_alter("expiring", {"retention.ms": "1"}), 1)

    def deleted() -> float:
        name = "ebb_log_deleted_records_total"
        return (value(scrape(url), name, cause="retention_time") or 0) - \
            (value(before, name, cause="retention_time") or 0)

    wait_for(lambda: deleted() == 4, what="retention deleting the four records")
    after = scrape(url)
    assert value(after, "kafka_log_log_logstartoffset", topic="expiring", partition="0") == 4
    assert value(after, "ebb_log_deleted_bytes_total", cause="retention_time") - \
        (value(before, "ebb_log_deleted_bytes_total", cause="retention_time") or 0) == size


def test_a_cleaning_round_shows_in_the_cleaners_gauges(url, client, broker):
    # Both logs are cleaned up to their active segment; then "held" must be 90% dirty to be cleaned
    # again and gets three more closed segments, which the gauge shows from then on.
    def write(topic: str, offsets: range) -> None:
        for i in offsets:  # one record a segment, two keys, batches of equal size
            data = batch([b"value-%02d" % i], keys=[b"k%d" % (i % 2)])
            assert produce(client, topic, 0, data).error_code == ErrorCode.NONE

    for topic in ("compacted", "held"):  # compacted once all is written, so one round cleans it all
        create_topic(client, topic, configs={"segment.bytes": "100"})
        write(topic, range(12))
        altered = client.request(_alter(topic, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}), 1)
        assert altered.responses[0].error_code == 0
    checkpoint = broker.data_dir / "logs" / "cleaner-offset-checkpoint"
    wait_for(lambda: checkpoint.exists()
             and {"compacted 0 11", "held 0 11"} <= set(checkpoint.read_text().splitlines()),
             what="both logs cleaned up to their active segment")
    assert client.request(_alter("held", {"min.cleanable.dirty.ratio": "0.9"}), 1).responses[0].error_code == 0
    write("held", range(12, 15))

    def gauge(name: str) -> float | None:
        return value(scrape(url), name)
    # Clean: the two batches kept (offsets 9 and 10); dirty: 11, 12 and 13 (14 is the active segment).
    wait_for(lambda: gauge("kafka_log_logcleanermanager_max_dirty_percent") == 60,
             what="the dirtiest log at three dirty segments of five")
    found = scrape(url)
    recopy = value(found, "kafka_log_logcleaner_cleaner_recopy_percent")
    assert recopy == 18  # 2 of 11 equal batches written back
    assert value(found, "kafka_log_logcleaner_max_buffer_utilization_percent") in (9, 10)  # 2 keys, 20 slots
    assert value(found, "kafka_log_logcleaner_max_clean_time_secs") == 0  # a round of a few hundred bytes
    assert value(found, "kafka_log_logcleaner_max_compaction_delay_secs") == 0  # max.compaction.lag.ms: never
    since = value(found, "kafka_log_logcleanermanager_time_since_last_run_ms")
    assert since is not None and 0 <= since < 10_000  # the backoff is 200 ms
    log_dir = str((broker.data_dir / "logs").absolute())
    assert value(found, "kafka_log_logcleanermanager_uncleanable_partitions_count", logDirectory=log_dir) == 0
    assert value(found, "kafka_log_logcleanermanager_uncleanable_bytes", logDirectory=log_dir) == 0


def test_trimming_what_groups_committed_counts_under_committed_offsets(url, client):
    from tests.broker.group_wire import commit

    create_topic(client, "committed", configs={"retention.committed.groups": "*"})
    assert produce(client, "committed", 0, batch([b"c%d" % i for i in range(10)])).error_code == ErrorCode.NONE
    before = scrape(url)
    assert commit(client, "metered-group", {("committed", 0): 6}) == {("committed", 0): ErrorCode.NONE}
    name = "ebb_log_deleted_records_total"
    wait_for(lambda: (value(scrape(url), name, cause="committed_offsets") or 0)
             - (value(before, name, cause="committed_offsets") or 0) == 6, what="the trim counted")
    assert value(scrape(url), "kafka_log_log_logstartoffset", topic="committed", partition="0") == 6


def _alter(topic: str, configs: dict[str, str]):
    from protocol.messages import IncrementalAlterConfigsRequest

    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    return IncrementalAlterConfigsRequest(resources=[resource(
        resource_type=2, resource_name=topic, configs=[resource.AlterableConfig(name=k, config_operation=0, value=v)
                                                        for k, v in configs.items()])], validate_only=False)


def test_a_partition_nobody_used_yet_has_its_log_series(url, client):
    create_topic(client, "untouched", partitions=3)
    samples = scrape(url)
    for index in range(3):
        partition = {"topic": "untouched", "partition": str(index)}
        assert value(samples, "kafka_log_log_logendoffset", **partition) == 0
        assert value(samples, "kafka_log_log_numlogsegments", **partition) == 1
    assert value(samples, "kafka_server_replicamanager_partitioncount") >= 3


def test_fetch_sessions_are_counted(url, client):
    from protocol.messages import FetchRequest
    from tests.broker.data_wire import fetch_request

    create_topic(client, "sessioned", 2)
    before = scrape(url)
    request = fetch_request("sessioned", 0, 0, session_epoch=0, partitions=[(0, 0, 1024), (1, 0, 1024)])
    session = client.request(request, 12).session_id
    assert session > 0
    after = scrape(url)
    sessions, cached = ("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                        "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
    assert value(after, sessions) == value(before, sessions) + 1
    assert value(after, cached) == value(before, cached) + 2
    closing = fetch_request("sessioned", 0, 0, session_id=session, session_epoch=1, partitions=[(0, 0, 1024)])
    closing.topics = []
    closing.forgotten_topics_data = [FetchRequest.ForgottenTopic(topic="sessioned", partitions=[0, 1])]
    assert client.request(closing, 12).session_id == 0
    assert value(scrape(url), sessions) == value(before, sessions)
    assert value(after, "ebb_fetch_session_evictions_total") == 0


def test_the_single_broker_is_its_own_active_controller(url):
    samples = scrape(url)
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(samples, "kafka_controller_kafkacontroller_preferredreplicaimbalancecount") == 0  # it leads all


def test_groups_are_counted_by_state(url, client):
    from tests.broker.group_wire import join, leave, sync

    stable = {"state": "Stable"}
    name = "kafka_coordinator_group_groupmetadatamanager_numgroups"
    before = value(scrape(url), name, **stable)
    member = join(client, "metered-members")
    assert sync(client, member, {member.member_id: b""}).error_code == ErrorCode.NONE
    assert value(scrape(url), name, **stable) == before + 1
    leave(client, "metered-members", (member.member_id, None))
    assert value(scrape(url), name, **stable) == before


def test_only_get_of_metrics_is_served(url):
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10)
    assert missing.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as posted:
        urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"), timeout=10)
    assert posted.value.code == 405


@pytest.mark.parametrize("bad", ["127.0.0.1:9404", "https://127.0.0.1:9404", "http://127.0.0.1:99999",
                                 "http://127.0.0.1"])
def test_a_bad_metrics_listener_stops_start_up_with_its_name(bad):
    with pytest.raises(ConfigError, match="ebb.metrics.listener"):
        build_config({"ebb.metrics.listener": bad})


def test_metrics_are_off_unless_asked_for():
    assert build_config({}).metrics_listener is None
    assert build_config({"ebb.metrics.listener": "http://127.0.0.1:0"}).metrics_listener.port == 0



DASHBOARD = Path(__file__).resolve().parents[2] / "ops" / "grafana" / "ebb.json"
# PromQL words that are not series names: functions, aggregations, modifiers, Grafana's variables.
_PROMQL_WORDS = {"sum", "max", "min", "avg", "count", "rate", "increase", "irate", "histogram_quantile", "by",
                 "without", "on", "ignoring", "group_left", "group_right", "topk", "bottomk", "and", "or",
                 "unless", "offset", "abs", "delta", "deriv", "clamp_min", "clamp_max", "__rate_interval",
                 "__interval", "__range"}


def series_in(expression: str) -> set[str]:
    """The series names a PromQL expression reads."""
    text = re.sub(r"\{[^}]*\}", "", expression)  # label matchers
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)  # label lists
    text = re.sub(r"\[[^]]*\]", "", text)  # range selectors
    words = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text))
    return {w for w in words if w not in _PROMQL_WORDS and not w.startswith("__")}


def test_every_dashboard_query_reads_series_the_broker_exports(url, client):
    create_topic(client, "dashboard", configs={"segment.bytes": "100"})
    for i in range(3):
        assert produce(client, "dashboard", 0, batch([b"d%d" % i])).error_code == ErrorCode.NONE
    fetch(client, "dashboard", 0, 0)
    assert delete_records(client, "dashboard", 0, 2).error_code == ErrorCode.NONE
    exported = series_names(scrape(url))
    panels = [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]
    titles = {p["title"] for p in panels}
    for wanted in ("Low watermark lag (records)", "Parked DeleteRecords", "DeleteRecords latency",
                   "Under-replicated and offline partitions", "Bytes in and out by topic", "Consumer groups by state"):
        assert wanted in titles
    expressions = [t["expr"] for p in panels for t in p["targets"]]
    assert len(expressions) >= 20
    for expression in expressions:
        names = series_in(expression)
        assert names, expression
        assert names <= exported, (expression, names - exported)
