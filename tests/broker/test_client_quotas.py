"""Client quotas on one broker (the embedded store): AlterClientQuotas and DescribeClientQuotas at both
versions, Kafka's checks, filters (strict or not, exact names, defaults, any name), validate_only,
removal, where the quotas are kept (Kafka's ZooKeeper layout, beside a user's SCRAM credentials) and that
they survive a restart; a producer over its quota gets its throttle time, its connection serves nothing
more until the time is up, and the metrics show its rate and throttles. Their effect on real clients is
tested against Kafka too (tests/interop/test_client_quotas_against_kafka.py)."""

from __future__ import annotations

import json
import time

import pytest

from protocol.errors import ErrorCode
from protocol.messages import AlterClientQuotasRequest as Alter
from protocol.messages import AlterUserScramCredentialsRequest as AlterScram
from protocol.messages import (
    ApiVersionsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    MetadataRequest,
)
from protocol.messages import DescribeClientQuotasRequest as Describe
from tests.broker.data_wire import batch, create_topic, fetch_request, produce_request
from tests.broker.wire_client import WireClient
from tests.support.broker_process import free_port
from tests.support.metrics_scrape import scrape, value

METRICS_PORT = free_port()

pytestmark = pytest.mark.alone  # throttle times bounded to the millisecond

Entry, Op = Alter.EntryData, Alter.EntryData.OpData


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"ebb.metrics.listener": f"http://127.0.0.1:{METRICS_PORT}"}


def entity(**parts: str | None) -> list:
    return [Entry.EntityData(entity_type=kind.replace("_", "-"), entity_name=name) for kind, name in parts.items()]


def op(key: str, value: float | None) -> Op:
    return Op(key=key, value=0.0 if value is None else value, remove=value is None)


def alter(client, *entries: tuple[list, list], version: int = 1, validate_only: bool = False) -> list:
    answer = client.send(Alter(entries=[Entry(entity=e, ops=ops) for e, ops in entries],
                               validate_only=validate_only), version=version)
    return [(ErrorCode(e.error_code).name, {p.entity_type: p.entity_name for p in e.entity}) for e in answer.entries]


def component(kind: str, match_type: int, match: str | None = None):
    return Describe.ComponentData(entity_type=kind, match_type=match_type, match=match)


def describe(client, *components, strict: bool = False, version: int = 1) -> dict:
    answer = client.send(Describe(components=list(components), strict=strict), version=version)
    assert answer.error_code == ErrorCode.NONE, answer
    return {tuple(sorted((p.entity_type, p.entity_name) for p in e.entity)): {v.key: v.value for v in e.values}
            for e in answer.entries}


@pytest.mark.parametrize("version", [0, 1])
def test_set_described_and_removed(broker, version):
    alice, c1 = f"alice{version}", f"c{version}"
    with WireClient(broker.port) as client:
        assert alter(client, (entity(user=alice), [op("producer_byte_rate", 1024), op("request_percentage", 12.5)]),
                     (entity(user=alice, client_id=c1), [op("consumer_byte_rate", 2048)]),
                     (entity(client_id=c1), [op("controller_mutation_rate", 3)]),
                     version=version) == [("NONE", {"user": alice}), ("NONE", {"user": alice, "client-id": c1}),
                                          ("NONE", {"client-id": c1})]
        mine = describe(client, component("user", 0, alice), version=version)
        assert mine == {(("user", alice),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
                        (("client-id", c1), ("user", alice)): {"consumer_byte_rate": 2048.0}}
        assert list(describe(client, component("user", 0, alice), strict=True, version=version)) == [
            (("user", alice),)]
        assert list(describe(client, component("client-id", 0, c1), component("user", 2), version=version)) == [
            (("client-id", c1), ("user", alice))]
        assert alter(client, (entity(user=alice), [op("producer_byte_rate", None), op("never_set", None)]),
                     version=version) == [("NONE", {"user": alice})]
        assert describe(client, component("user", 0, alice), strict=True, version=version) == {
            (("user", alice),): {"request_percentage": 12.5}}
        alter(client, (entity(user=alice), [op("request_percentage", None)]),
              (entity(user=alice, client_id=c1), [op("consumer_byte_rate", None)]),
              (entity(client_id=c1), [op("controller_mutation_rate", None)]), version=version)
        assert describe(client, component("client-id", 0, c1), version=version) == {}


def test_defaults_and_any_name(broker):
    with WireClient(broker.port) as client:
        alter(client, (entity(user=None), [op("producer_byte_rate", 100)]),
              (entity(user=None, client_id=None), [op("producer_byte_rate", 200)]),
              (entity(user="dora"), [op("producer_byte_rate", 300)]),
              (entity(ip=None), [op("connection_creation_rate", 10)]),
              (entity(ip="10.1.2.3"), [op("connection_creation_rate", 20)]))
        default_user = describe(client, component("user", 1), strict=True)
        assert default_user == {(("user", None),): {"producer_byte_rate": 100.0}}
        any_user = describe(client, component("user", 2))
        assert set(any_user) >= {(("user", None),), (("user", "dora"),), (("client-id", None), ("user", None))}
        assert describe(client, component("user", 1), component("client-id", 1)) == {
            (("client-id", None), ("user", None)): {"producer_byte_rate": 200.0}}
        assert describe(client, component("ip", 2)) == {(("ip", None),): {"connection_creation_rate": 10.0},
                                                        (("ip", "10.1.2.3"),): {"connection_creation_rate": 20.0}}
        alter(client, (entity(user=None), [op("producer_byte_rate", None)]),
              (entity(user=None, client_id=None), [op("producer_byte_rate", None)]),
              (entity(user="dora"), [op("producer_byte_rate", None)]),
              (entity(ip=None), [op("connection_creation_rate", None)]),
              (entity(ip="10.1.2.3"), [op("connection_creation_rate", None)]))
        assert describe(client) == {}


@pytest.mark.parametrize("entry, says", [
    ((entity(), [op("producer_byte_rate", 1)]), "Invalid empty client quota entity"),
    ((entity(group="g"), [op("producer_byte_rate", 1)]), "Unhandled client quota entity type: group"),
    ((entity(user=""), [op("producer_byte_rate", 1)]), "Empty user not supported"),
    ((entity(user="u", ip="1.2.3.4"), [op("producer_byte_rate", 1)]), "should"),
    ((entity(ip="not a host"), [op("connection_creation_rate", 1)]), "is not a valid IP or resolvable host"),
    ((entity(user="u"), [op("connection_creation_rate", 1)]), "Invalid configuration key connection_creation_rate"),
    ((entity(ip="1.2.3.4"), [op("producer_byte_rate", 1)]), "Invalid configuration key producer_byte_rate"),
    ((entity(client_id="c"), [op("producer_byte_rate", 0)]), "must be greater than 0"),
    ((entity(client_id="c"), [op("producer_byte_rate", 1.5)]), "cannot be a fractional value"),
    ((entity(client_id="c"), [op("producer_byte_rate", 1), op("producer_byte_rate", 2)]), "duplicate entity"),
])
def test_refused_as_kafka_refuses(broker, entry, says):
    with WireClient(broker.port) as client:
        answer = client.send(Alter(entries=[Entry(entity=entry[0], ops=entry[1])], validate_only=False), version=1)
    [result] = answer.entries
    assert result.error_code == ErrorCode.INVALID_REQUEST and says in result.error_message, result


def test_one_refusal_leaves_the_others_applied_and_validate_only_writes_nothing(broker):
    with WireClient(broker.port) as client:
        assert alter(client, (entity(client_id="good"), [op("producer_byte_rate", 5)]),
                     (entity(client_id="bad"), [op("producer_byte_rate", -5)])) == [
            ("NONE", {"client-id": "good"}), ("INVALID_REQUEST", {"client-id": "bad"})]
        assert alter(client, (entity(client_id="dry"), [op("producer_byte_rate", 5)]), validate_only=True) == [
            ("NONE", {"client-id": "dry"})]
        assert set(describe(client, component("client-id", 2))) == {(("client-id", "good"),)}
        # an entity named twice: the first is applied, the answer is the second's refusal (as Kafka does)
        assert alter(client, (entity(client_id="twice"), [op("producer_byte_rate", 7)]),
                     (entity(client_id="twice"), [op("producer_byte_rate", 8)])) == [
            ("INVALID_REQUEST", {"client-id": "twice"})]
        assert describe(client, component("client-id", 0, "twice")) == {
            (("client-id", "twice"),): {"producer_byte_rate": 7.0}}
        alter(client, (entity(client_id="good"), [op("producer_byte_rate", None)]),
              (entity(client_id="twice"), [op("producer_byte_rate", None)]))


@pytest.mark.parametrize("components, code", [
    ([component("", 2)], ErrorCode.INVALID_REQUEST),
    ([component("user", 2), component("user", 0, "bob")], ErrorCode.INVALID_REQUEST),
    ([component("group", 2)], ErrorCode.UNSUPPORTED_VERSION),
    ([component("user", 5)], ErrorCode.INVALID_REQUEST),
    ([component("user", 0)], ErrorCode.INVALID_REQUEST),
    ([component("client-id", 1, "x")], ErrorCode.INVALID_REQUEST),
    ([component("ip", 2), component("user", 2)], ErrorCode.INVALID_REQUEST),
])
def test_bad_filters(broker, components, code):
    with WireClient(broker.port) as client:
        answer = client.send(Describe(components=components, strict=True), version=1)
    assert (answer.error_code, answer.entries) == (code, None)


def test_kept_in_kafkas_layout_beside_scram_credentials_and_across_a_restart(broker):
    with WireClient(broker.port) as client:
        alter(client, (entity(user="erin"), [op("producer_byte_rate", 4096), op("request_percentage", 50)]),
              (entity(user="erin", client_id="app 1"), [op("consumer_byte_rate", 8192)]),
              (entity(client_id=None), [op("producer_byte_rate", 1e7)]))
        scram = client.send(AlterScram(deletions=[], upsertions=[AlterScram.ScramCredentialUpsertion(
            name="erin", mechanism=2, iterations=4096, salt=b"salt", salted_password=b"p" * 64)]), 0)
        assert scram.results[0].error_code == ErrorCode.NONE
    nodes = json.loads((broker.data_dir / "logs" / "ebb-metadata.json").read_text())["nodes"]
    erin = json.loads(nodes["/config/users/erin"][0])["config"]
    assert erin["producer_byte_rate"] == "4096" and erin["request_percentage"] == "50.0"
    assert erin["SCRAM-SHA-512"].startswith("salt=")
    assert json.loads(nodes["/config/users/erin/clients/app%201"][0]) == {
        "version": 1, "config": {"consumer_byte_rate": "8192"}}
    assert json.loads(nodes["/config/clients/<default>"][0])["config"] == {"producer_byte_rate": "10000000"}
    changes = [json.loads(data) for path, (data, _) in nodes.items() if path.startswith("/config/changes/config_")]
    assert {"version": 2, "entity_path": "users/erin/clients/app%201"} in changes
    broker.restart()
    with WireClient(broker.port) as client:
        assert describe(client, component("user", 0, "erin")) == {
            (("user", "erin"),): {"producer_byte_rate": 4096.0, "request_percentage": 50.0},
            (("client-id", "app 1"), ("user", "erin")): {"consumer_byte_rate": 8192.0}}
        # removing the quotas keeps the credentials
        alter(client, (entity(user="erin"), [op("producer_byte_rate", None), op("request_percentage", None)]),
              (entity(user="erin", client_id="app 1"), [op("consumer_byte_rate", None)]),
              (entity(client_id=None), [op("producer_byte_rate", None)]))
        assert describe(client) == {}
    nodes = json.loads((broker.data_dir / "logs" / "ebb-metadata.json").read_text())["nodes"]
    assert list(json.loads(nodes["/config/users/erin"][0])["config"]) == ["SCRAM-SHA-512"]


def test_a_producer_over_its_quota_is_throttled_muted_and_measured(broker):
    with WireClient(broker.port) as client:
        create_topic(client, "metered")
        alter(client, (entity(client_id="metered"), [op("producer_byte_rate", 10_000)]))
    request = produce_request("metered", 0, batch([b"m" * 120_000]))
    with WireClient(broker.port, client_id="metered") as producer:
        answer = producer.send(request, 9)
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        # 120 KB and its framing over the 10 windows a new client is given: O = 12,0xx B/s
        throttle_ms = answer.throttle_time_ms
        assert 2000 < throttle_ms < 2100, throttle_ms
        sent = time.monotonic()
        producer.send(MetadataRequest(topics=[]), 12)  # the connection serves nothing more until then
        assert time.monotonic() - sent >= throttle_ms / 1000 * 0.95
    with WireClient(broker.port, client_id="unmetered") as other:  # another client is not held back
        assert other.send(request, 9).throttle_time_ms == 0
    samples = scrape(f"http://127.0.0.1:{METRICS_PORT}/metrics")
    rate = value(samples, "kafka_server_produce_byte_rate", user="", client_id="metered")
    assert rate is not None and 11_000 < rate < 12_200, rate  # 120 KB over 10 s and what passed since
    assert value(samples, "ebb_client_quota_produce_throttled_requests_total", user="", client_id="metered") == 1
    assert value(samples, "ebb_client_quota_produce_throttle_seconds_total", user="", client_id="metered") == \
        throttle_ms / 1000
    with WireClient(broker.port) as client:
        alter(client, (entity(client_id="metered"), [op("producer_byte_rate", None)]))



def test_connections_over_their_address_rate_are_closed_unserved(broker):
    """connection_creation_rate 2 on 127.0.0.1: over the 10 windows a new address is given, 20 connections
    pass; the 21st takes the rate over 2, is taken back, served nothing and closed after its throttle time,
    (O - 2) / 2 * W: under 500 ms (W is 10 s and the time the 20 took), capped at one window."""
    with WireClient(broker.port) as admin:  # opened before the quota: it stays served
        alter(admin, (entity(ip="127.0.0.1"), [op("connection_creation_rate", 2)]))
        for _ in range(20):
            with WireClient(broker.port) as client:
                client.send(MetadataRequest(topics=[]), 12)
        refused = WireClient(broker.port, timeout=5)
        started = time.monotonic()
        with pytest.raises((ConnectionError, EOFError, OSError)):
            refused.send(MetadataRequest(topics=[]), 12)
        assert 0.1 <= time.monotonic() - started < 1.5
        refused.close()
        alter(admin, (entity(ip="127.0.0.1"), [op("connection_creation_rate", None)]))
    with WireClient(broker.port) as client:  # no quota: served again
        client.send(MetadataRequest(topics=[]), 12)
    assert "connection throttled" in broker.log_text()


def test_a_consumer_over_its_quota_gets_no_data_and_reads_no_more_than_its_window(broker):
    """consumer_byte_rate 10,000 B/s: a Fetch reads at most 10 windows' worth (100,000 B, Kafka's cap: 9
    batches of 10 KB here), which is within the quota; a second goes over it: it is answered with no data
    and a throttle time of (2n / W - 10,000) / 10,000 * W for n bytes a fetch (W: 10 s and the time since
    the first), its bytes taken back,
    so a third is throttled the same; asking for a new fetch session then creates none (Kafka answers it
    sessionless)."""
    with WireClient(broker.port) as client:
        create_topic(client, "slow")
        for _ in range(30):
            answer = client.send(produce_request("slow", 0, batch([b"s" * 10_000])), 9)
            assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        alter(client, (entity(client_id="slow-reader"), [op("consumer_byte_rate", 10_000)]))
    with WireClient(broker.port, client_id="slow-reader") as reader:
        first = reader.send(fetch_request("slow", 0, 0), 12)
        assert first.throttle_time_ms == 0
        records = first.responses[0].partitions[0].records
        assert 90_000 < len(records) <= 100_000, len(records)
    metrics = f"http://127.0.0.1:{METRICS_PORT}/metrics"
    from_files = value(scrape(metrics), "ebb_fetch_bytes_sent_from_files_total")
    for session_epoch in (-1, -1, 0):
        with WireClient(broker.port, client_id="slow-reader") as reader:
            answer = reader.send(fetch_request("slow", 0, 0, session_epoch=session_epoch), 12)
        assert (answer.error_code, answer.session_id, answer.responses) == (ErrorCode.NONE, 0, [])
        # less the time since the first fetch, by which the 10 s window has grown
        assert 0 <= (2 * len(records) / 10 - 10_000) - answer.throttle_time_ms < 1000, answer.throttle_time_ms
    # the segment files read for the throttled answers were let go, not sent (the first answer's bytes may
    # be counted only now: the count follows the send)
    assert (value(scrape(metrics), "ebb_fetch_bytes_sent_from_files_total") or 0) - (from_files or 0) <= len(records)
    with WireClient(broker.port) as client:
        alter(client, (entity(client_id="slow-reader"), [op("consumer_byte_rate", None)]))



def test_a_quota_set_reaches_a_connection_with_a_kept_fetch_resolve(broker):
    """A consumer without a session has its resolve kept on its connection (broker/handlers/
    fetch_resolve.py); quotas are not part of it: one set meanwhile holds its next Fetch back."""
    with WireClient(broker.port) as client:
        create_topic(client, "kept-quota")
        for _ in range(30):
            answer = client.send(produce_request("kept-quota", 0, batch([b"k" * 10_000])), 9)
            assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    with WireClient(broker.port, client_id="kept-reader") as reader:
        for _ in range(2):  # the second is served from what the first kept
            answer = reader.send(fetch_request("kept-quota", 0, 0), 12)
            assert answer.throttle_time_ms == 0 and len(answer.responses[0].partitions[0].records) > 300_000
        with WireClient(broker.port) as client:
            alter(client, (entity(client_id="kept-reader"), [op("consumer_byte_rate", 10_000)]))
        capped = reader.send(fetch_request("kept-quota", 0, 0), 12)  # read no further than the quota's window
        assert capped.throttle_time_ms == 0 and len(capped.responses[0].partitions[0].records) <= 100_000
        held = reader.send(fetch_request("kept-quota", 0, 0), 12)
        assert held.throttle_time_ms > 0 and held.responses == []
    with WireClient(broker.port) as client:
        alter(client, (entity(client_id="kept-reader"), [op("consumer_byte_rate", None)]))


def test_ebb_quotas_sets_lists_and_deletes(broker):
    from tests.support.ebb_cli import ebb

    server = ["--bootstrap-server", broker.bootstrap]
    done = ebb("quotas", "set", "--user", "gail", "--client", "app", "--add",
               "producer_byte_rate=2048,request_percentage=12.5", *server)
    assert done.returncode == 0, done.stderr
    assert ebb("quotas", "set", "--client-default", "--add", "consumer_byte_rate=4096", *server).returncode == 0
    listed = ebb("quotas", "list", "--user", "gail", *server, "--output", "json")
    assert json.loads(listed.stdout) == {"quotas": [{"entity": {"client-id": "app", "user": "gail"},
                                                     "quotas": {"producer_byte_rate": 2048.0,
                                                                "request_percentage": 12.5}}]}
    table = ebb("quotas", "list", "--client-default", *server).stdout
    assert "client-id <default>" in table and "consumer_byte_rate" in table and "4096" in table
    refused = ebb("quotas", "set", "--user", "gail", "--add", "producer_byte_rate=1.5", *server)
    assert refused.returncode != 0 and "fractional" in refused.stderr
    assert ebb("quotas", "set", "--user", "gail", "--add", "producer_byte_rate=fast", *server).returncode != 0
    assert ebb("quotas", "delete", "--user", "gail", "--client", "app", "--key", "producer_byte_rate",
               "--key", "request_percentage", *server).returncode == 0
    assert ebb("quotas", "delete", "--client-default", "--key", "consumer_byte_rate", *server).returncode == 0
    assert json.loads(ebb("quotas", "list", *server, "--output", "json").stdout) == {"quotas": []}


def test_topic_mutations_over_their_quota_are_refused_or_throttled(broker):
    """controller_mutation_rate 5/s: a bucket of 55 partitions (11 windows of 1 s). CreateTopics v7
    (strict) takes a topic of 60 whole, as the bucket was full, and refuses the next one with
    THROTTLING_QUOTA_EXCEEDED and the time the bucket needs back to zero (5 below: 1 s), for which the
    connection serves nothing; DeleteTopics v4 (permissive) deletes both topics and throttles;
    CreatePartitions v3 is refused while the bucket is below zero. The metrics count the throttles."""
    with WireClient(broker.port) as admin:
        alter(admin, (entity(client_id="mutator"), [op("controller_mutation_rate", 5)]))
    with WireClient(broker.port, client_id="mutator") as client:
        topics = [CreateTopicsRequest.CreatableTopic(name=name, num_partitions=count, replication_factor=1)
                  for name, count in (("m-big", 60), ("m-small", 1), ("m-next", 1))]
        answer = client.send(CreateTopicsRequest(topics=topics, timeout_ms=10_000), 7)
        assert [(t.name, ErrorCode(t.error_code).name) for t in answer.topics] == [
            ("m-big", "NONE"), ("m-small", "THROTTLING_QUOTA_EXCEEDED"), ("m-next", "THROTTLING_QUOTA_EXCEEDED")]
        assert answer.topics[1].error_message == "The throttling quota has been exceeded."
        throttle_ms = answer.throttle_time_ms
        assert 800 < throttle_ms <= 1000, throttle_ms
        sent = time.monotonic()
        answer = client.send(CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="m-big", count=61, assignments=None)], timeout_ms=10_000, validate_only=False), 3)
        assert time.monotonic() - sent >= throttle_ms / 1000 * 0.95  # muted until the throttle was over
        assert ErrorCode(answer.results[0].error_code).name == "NONE"  # 1 s later: back at 0, taken: -1
        answer = client.send(DeleteTopicsRequest(topic_names=["m-big"], timeout_ms=10_000), 4)
        assert ErrorCode(answer.responses[0].error_code).name == "NONE"  # permissive: deleted, -62
        assert 11_000 < answer.throttle_time_ms <= 12_400, answer.throttle_time_ms  # less the deletion's time
    with WireClient(broker.port, client_id="mutator") as client:  # a new connection: not muted
        answer = client.send(CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="m-none", count=2, assignments=None)], timeout_ms=10_000, validate_only=False), 3)
        assert ErrorCode(answer.results[0].error_code).name == "UNKNOWN_TOPIC_OR_PARTITION"  # checked first
        answer = client.send(CreateTopicsRequest(topics=topics[1:2], timeout_ms=10_000, validate_only=True), 6)
        assert ErrorCode(answer.topics[0].error_code).name == "THROTTLING_QUOTA_EXCEEDED"
    throttled, rate = _measured("mutator", "controller_mutation", "kafka_server_controllermutation_mutation_rate")
    assert throttled == 3 and rate > 0, (throttled, rate)
    tokens = value(scrape(f"http://127.0.0.1:{METRICS_PORT}/metrics"), "kafka_server_controllermutation_tokens",
                   user="", client_id="mutator")
    # below zero since the deletion (-62, refilling at 5/s): the refusal just before showed it
    assert tokens is not None and -62 <= tokens < 0, tokens
    with WireClient(broker.port) as admin:
        alter(admin, (entity(client_id="mutator"), [op("controller_mutation_rate", None)]))
    with WireClient(broker.port, client_id="mutator") as client:  # no quota: nothing is charged
        answer = client.send(CreateTopicsRequest(topics=topics[1:2], timeout_ms=10_000), 7)
        assert (answer.topics[0].error_code, answer.throttle_time_ms) == (ErrorCode.NONE, 0)


def test_a_client_over_its_request_percentage_is_throttled_for_at_most_a_window(broker):
    """request_percentage 0.0001 (a millionth of the loop): any request's loop time puts the client over
    it, by far; the throttle is capped at one window (1 s), given in the answer and as a mute of the
    connection. ApiVersions is charged as Kafka charges it; another client is not held back."""
    with WireClient(broker.port) as admin:
        alter(admin, (entity(client_id="busy"), [op("request_percentage", 0.0001)]))
    with WireClient(broker.port, client_id="busy") as client:
        answer = client.send(MetadataRequest(topics=[]), 12)
        assert answer.throttle_time_ms == 1000, answer.throttle_time_ms
        sent = time.monotonic()
        answer = client.send(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        assert time.monotonic() - sent >= 0.95  # muted for the throttle of the Metadata answer
        assert answer.throttle_time_ms == 1000
    with WireClient(broker.port, client_id="idle") as other:
        assert other.send(MetadataRequest(topics=[]), 12).throttle_time_ms == 0
    throttled, rate = _measured("busy", "request", "kafka_server_request_time")
    assert throttled == 2 and rate > 0, (throttled, rate)
    with WireClient(broker.port) as admin:
        alter(admin, (entity(client_id="busy"), [op("request_percentage", None)]))
    with WireClient(broker.port, client_id="busy") as client:
        assert client.send(MetadataRequest(topics=[]), 12).throttle_time_ms == 0


def test_a_consumer_over_its_request_percentage_gets_no_data(broker):
    """As over its byte rate (Kafka's handleFetchRequest takes the larger of the two throttles): a consumer
    over its request_percentage is answered with no records and no new fetch session, with the throttle;
    once the quota is gone the same Fetch carries the records."""
    with WireClient(broker.port) as client:
        create_topic(client, "busy-read")
        answer = client.send(produce_request("busy-read", 0, batch([b"r" * 1000])), 9)
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        alter(client, (entity(client_id="busy-reader"), [op("request_percentage", 0.0001)]))
    for session_epoch in (-1, 0):
        with WireClient(broker.port, client_id="busy-reader") as reader:
            answer = reader.send(fetch_request("busy-read", 0, 0, session_epoch=session_epoch), 12)
        assert (answer.error_code, answer.session_id, answer.responses, answer.throttle_time_ms) == (
            ErrorCode.NONE, 0, [], 1000), answer
    with WireClient(broker.port) as client:
        alter(client, (entity(client_id="busy-reader"), [op("request_percentage", None)]))
    with WireClient(broker.port, client_id="busy-reader") as reader:
        answer = reader.send(fetch_request("busy-read", 0, 0), 12)
    assert answer.throttle_time_ms == 0 and len(answer.responses[0].partitions[0].records) > 1000


def _measured(client_id: str, kind: str, rate_name: str) -> tuple[float, float]:
    """The client's throttled requests of a quota kind and its rate, as scraped (0 when not shown)."""
    samples = scrape(f"http://127.0.0.1:{METRICS_PORT}/metrics")
    labels = {"user": "", "client_id": client_id}
    return (value(samples, f"ebb_client_quota_{kind}_throttled_requests_total", **labels) or 0,
            value(samples, rate_name, **labels) or 0)
