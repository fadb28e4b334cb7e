"""Dynamic broker configs (KIP-226) against Kafka 4.3.1: per-broker and cluster-wide values set with
IncrementalAlterConfigs and AlterConfigs, described with their sources and synonyms on the broker and
on a topic, and what either refuses. Both start with log.retention.hours=2 (a static layer under the
dynamic ones). Kafka applies a change when its metadata log reaches the broker, so each change is
awaited (unrecorded) before it is described. The producer-state settings are also watched at work:
a transactional batch for a partition its transaction never added, taken once verification is off
and refused once it is back on, and an idempotent producer's retry answered as a duplicate until a
lowered producer.id.expiration.ms forgets the producer (both brokers check every 200 ms), after
which the same batch is appended again. And a static bound at work: group.max.size=1 (both
brokers start with it) refuses a second member of a Stable group and takes its member back."""

from __future__ import annotations

import time

import pytest

from protocol.messages import (
    AlterConfigsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    DescribeProducersRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
)
from protocol.records import build_batch
from tests.broker.data_wire import produce_request
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED, _config_difference, create, topic
from tests.differential.test_transactions_against_kafka import _ready_producer
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

ALLOWED_HERE = {
    **ALLOWED,
    ("an unknown config", "responses[0].error_code"):
        "Kafka stores a broker config it does not know (and lists it read-only); Ebb refuses what it would "
        "only store, naming it",
    ("create dyn", "topics[dyn].configs[retention.ms].config_source"):
        "Kafka's CreateTopics and DescribeConfigs disagree under a static log.retention.hours; Ebb follows "
        "DescribeConfigs (tests/differential/test_broker_properties_against_kafka.py)",
    **{(label, f"results[0].configs[log.dirs]{leaf}"): "each broker's own log directory"
       for label in ("this broker", "this broker after") for leaf in (".value", ".synonyms[log.dirs].value")},
    **{(label, "results[0].configs[log.retention.hours].value"):
       "Kafka 4.3 reports its default (168) as the value while its first synonym is the static 2 in force; "
       "Ebb reports the 2 in force" for label in ("this broker", "this broker after")},
}

ALLOWED_HERE.update({
    ("producers after the retry went in again", f"topics[pstate].partitions[0].active_producers[{i}].last_timestamp"):
        "the records' timestamps: each broker's run takes its own current time (Kafka expires by them)"
    for i in (0, 1)})

BROKER, TOPIC = 4, 2
SET, DELETE, APPEND = 0, 1, 2
BROKER_KEYS = ["log.retention.ms", "log.retention.hours", "message.max.bytes", "leader.replication.throttled.rate",
               "log.cleanup.policy", "log.segment.bytes", "log.dirs"]
Resource = DescribeConfigsRequest.DescribeConfigsResource
Alter = IncrementalAlterConfigsRequest.AlterConfigsResource
Op = Alter.AlterableConfig


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"log.retention.hours": "2", "producer.id.expiration.check.interval.ms": "200", "group.max.size": "1",
            "group.initial.rebalance.delay.ms": "0"}


def _describe(name: str, keys: list[str], resource_type: int = BROKER) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(resources=[Resource(resource_type=resource_type, resource_name=name,
                                                      configuration_keys=keys)], include_synonyms=True)


def _incremental(peer: Peer, label: str, name: str, *ops: tuple[str, int, str | None], validate_only=False) -> None:
    peer.ask(label, IncrementalAlterConfigsRequest(resources=[Alter(
        resource_type=BROKER, resource_name=name,
        configs=[Op(name=k, config_operation=o, value=v) for k, o, v in ops])], validate_only=validate_only), 1)


def _in_force(peer: Peer, **expected: str | None) -> None:
    """Wait until broker 1 reports these values (None: back to no dynamic value of its own)."""
    keys = [k.replace("_", ".") for k in expected]

    def arrived() -> bool:
        [result] = peer.send(_describe("1", keys), 4).results
        values = {c.name: c.value for c in result.configs}
        return all(values.get(k.replace("_", ".")) == v for k, v in expected.items() if v is not None)
    wait_for(arrived, timeout_s=30, what=f"{peer.name}: dynamic configs in force")


def dynamic_broker_configs(peer: Peer) -> None:
    create(peer, "create dyn", topic("dyn"))
    peer.wait_for_leaders("dyn", 1)
    peer.ask("cluster defaults before", _describe("", ["log.retention.ms", "message.max.bytes"]), 4)
    _incremental(peer, "set cluster defaults", "", ("log.retention.ms", SET, "3600000"),
                 ("message.max.bytes", SET, "2000000"), ("leader.replication.throttled.rate", SET, "500"))
    _incremental(peer, "set this broker's", "1", ("log.retention.ms", SET, "7200000"),
                 ("leader.replication.throttled.rate", SET, "1000"))
    _in_force(peer, log_retention_ms="7200000", message_max_bytes="2000000")
    peer.ask("cluster defaults", _describe("", ["log.retention.ms", "message.max.bytes",
                                                "leader.replication.throttled.rate"]), 4)
    peer.ask("this broker", _describe("1", BROKER_KEYS), 4)
    peer.ask("a topic", _describe("dyn", ["retention.ms", "max.message.bytes"], TOPIC), 4)

    _incremental(peer, "another broker", "2", ("log.retention.ms", SET, "1"))
    _incremental(peer, "not dynamic", "1", ("log.dirs", SET, "/elsewhere"))
    _incremental(peer, "not dynamic, cluster-wide", "", ("broker.id", SET, "3"))
    _incremental(peer, "a bad value", "", ("log.retention.ms", SET, "soon"))
    _incremental(peer, "a negative throttle", "1", ("follower.replication.throttled.rate", SET, "-1"))
    _incremental(peer, "an unknown config", "", ("no.such.config", SET, "1"))
    _incremental(peer, "validate only", "", ("log.retention.bytes", SET, "1000"), validate_only=True)

    _incremental(peer, "append to a list", "", ("log.cleanup.policy", APPEND, "compact"))
    _incremental(peer, "delete this broker's", "1", ("log.retention.ms", DELETE, None))
    peer.ask("legacy alter of this broker", AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
        resource_type=BROKER, resource_name="1", configs=[AlterConfigsRequest.AlterConfigsResource.AlterableConfig(
            name="log.retention.bytes", value="100000")])], validate_only=False), 2)
    _in_force(peer, log_retention_ms="3600000", log_cleanup_policy="delete,compact", log_retention_bytes="100000")
    peer.ask("this broker after", _describe("1", BROKER_KEYS + ["log.retention.bytes"]), 4)
    peer.ask("a topic after", _describe("dyn", ["retention.ms", "retention.bytes", "cleanup.policy"], TOPIC), 4)


def test_dynamic_broker_configs(ebb_peer, kafka_peer):
    found = compare(dynamic_broker_configs, ebb_peer, kafka_peer, ALLOWED_HERE, ignore=_config_difference)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


EXPIRATION, VERIFICATION = "producer.id.expiration.ms", "transaction.partition.verification.enable"
PRODUCER_KEYS = [EXPIRATION, VERIFICATION, "producer.id.expiration.check.interval.ms"]


def _produced(peer: Peer, label: str, batch: bytes, transactional_id: str | None = None):
    reply = peer.ask(label, produce_request("pstate", 0, batch, acks=-1, transactional_id=transactional_id), 9)
    return reply.responses[0].partition_responses[0]


def producer_state_configs(peer: Peer) -> None:
    # its own cleanup policy: the other scenario leaves a cluster-wide delete,compact (keyless records refused)
    topic_ = CreateTopicsRequest.CreatableTopic(name="pstate", num_partitions=1, replication_factor=1, configs=[
        CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name="cleanup.policy", value="delete")])
    peer.send(CreateTopicsRequest(topics=[topic_], timeout_ms=30_000), 7)
    peer.wait_for_leaders("pstate", 1)
    peer.ask("producer settings before", _describe("1", PRODUCER_KEYS), 4)
    _incremental(peer, "expiration 0", "", (EXPIRATION, SET, "0"))
    _incremental(peer, "expiration negative", "1", (EXPIRATION, SET, "-5"))
    _incremental(peer, "expiration not a number", "", (EXPIRATION, SET, "daily"))
    _incremental(peer, "expiration beyond an int", "", (EXPIRATION, SET, "3000000000"))
    _incremental(peer, "verification not a boolean", "", (VERIFICATION, SET, "maybe"))
    _incremental(peer, "the check interval is static", "1", ("producer.id.expiration.check.interval.ms", SET, "5"))
    now = int(time.time() * 1000)

    # Verification off, cluster-wide: a batch for a partition the transaction never added is taken.
    _incremental(peer, "verification off", "", (VERIFICATION, SET, "false"))
    _in_force(peer, transaction_partition_verification_enable="false")
    loose = _ready_producer(peer, "loose")
    batch = build_batch([(None, b"unadded", [], now)], producer_id=loose.producer_id,
                        producer_epoch=loose.producer_epoch, base_sequence=0, is_transactional=True)
    _produced(peer, "unadded batch, verification off", batch, "loose")
    _incremental(peer, "verification back on", "", (VERIFICATION, DELETE, None))
    _in_force(peer, transaction_partition_verification_enable="true")
    strict = _ready_producer(peer, "strict")
    batch = build_batch([(None, b"unadded", [], now)], producer_id=strict.producer_id,
                        producer_epoch=strict.producer_epoch, base_sequence=0, is_transactional=True)
    _produced(peer, "unadded batch, verification on", batch, "strict")

    # An idempotent producer's retry is a duplicate until the producer expires, then a new append.
    idem = peer.send(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)
    batch = build_batch([(None, b"once", [], now)], producer_id=idem.producer_id,
                        producer_epoch=idem.producer_epoch, base_sequence=0)
    first = _produced(peer, "idempotent batch", batch)
    _produced(peer, "its retry, a duplicate", batch)
    _incremental(peer, "expiration of two seconds, this broker", "1", (EXPIRATION, SET, "2000"))
    _in_force(peer, producer_id_expiration_ms="2000")
    peer.ask("producer settings after", _describe("1", PRODUCER_KEYS), 4)

    def appended_again() -> bool:
        reply = peer.send(produce_request("pstate", 0, batch, acks=-1), 9).responses[0].partition_responses[0]
        return reply.error_code == 0 and reply.base_offset > first.base_offset
    wait_for(appended_again, timeout_s=30, what=f"{peer.name}: the idempotent producer expired")
    peer.ask("producers after the retry went in again", DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name="pstate", partition_indexes=[0])]), 0)
    _incremental(peer, "expiration back", "1", (EXPIRATION, DELETE, None))


def test_producer_state_configs(ebb_peer, kafka_peer):
    found = compare(producer_state_configs, ebb_peer, kafka_peer, ALLOWED_HERE, ignore=_config_difference)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


def group_max_size(peer: Peer) -> None:
    from protocol.messages import DescribeGroupsRequest, FindCoordinatorRequest, SyncGroupRequest
    from tests.broker.group_wire import assignment, join_request

    wait_for(lambda: peer.send(FindCoordinatorRequest(key="bounded", key_type=0), 3).error_code == 0,
             timeout_s=30, what=f"{peer.name}: a group coordinator")  # the offsets topic coming up
    wait_for(lambda: peer.send(DescribeGroupsRequest(groups=["bounded"], include_authorized_operations=False), 5)
             .groups[0].error_code == 0, timeout_s=30, what=f"{peer.name}: the group's partition loaded")
    peer.ask("group bound", _describe("1", ["group.max.size"]), 4)
    first = peer.ask("join without a member id", join_request("bounded"), 7)
    joined = peer.ask("join with the member id", join_request("bounded", first.member_id), 7)
    member, generation = joined.member_id, joined.generation_id
    peer.ask("sync as the leader", SyncGroupRequest(
        group_id="bounded", generation_id=generation, member_id=member, group_instance_id=None,
        protocol_type="consumer", protocol_name="range", assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=member, assignment=assignment({"t": [0]}))]), 5)
    for version in (3, 5, 7, 9):
        peer.ask(f"a second member, v{version}", join_request("bounded"), version)
    peer.ask("the member rejoins", join_request("bounded", member), 7)
    peer.ask("the group after", DescribeGroupsRequest(groups=["bounded"], include_authorized_operations=False), 5)


def test_group_max_size(ebb_peer, kafka_peer):
    found = compare(group_max_size, ebb_peer, kafka_peer, ALLOWED_HERE)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


LOGGER = 8


def _loggers(peer: Peer, label: str, name: str, *ops: tuple[str, int, str | None], validate_only=False) -> None:
    peer.ask(label, IncrementalAlterConfigsRequest(resources=[Alter(
        resource_type=LOGGER, resource_name=name,
        configs=[Op(name=k, config_operation=o, value=v) for k, o, v in ops])], validate_only=validate_only), 1)


def broker_loggers(peer: Peer) -> None:
    """Only root is a logger both have (their other loggers are each one's own code)."""
    _loggers(peer, "logger: set root", "1", ("root", SET, "WARN"))
    for version in (1, 4):
        peer.ask(f"logger: describe root v{version}", DescribeConfigsRequest(resources=[Resource(
            resource_type=LOGGER, resource_name="1", configuration_keys=["root"])], include_synonyms=True), version)
    _loggers(peer, "logger: an unknown one", "1", ("no.such.logger", SET, "DEBUG"))
    _loggers(peer, "logger: a bad level", "1", ("root", SET, "LOUD"))
    _loggers(peer, "logger: append", "1", ("root", APPEND, "DEBUG"))
    _loggers(peer, "logger: delete root", "1", ("root", DELETE, None))
    _loggers(peer, "logger: the cluster", "", ("root", SET, "DEBUG"))
    _loggers(peer, "logger: another broker", "2", ("root", SET, "DEBUG"))
    _loggers(peer, "logger: validate only", "1", ("root", SET, "DEBUG"), validate_only=True)
    peer.ask("logger: describe root after", _describe("1", ["root"], LOGGER), 4)
    _loggers(peer, "logger: root back", "1", ("root", SET, "INFO"))


def test_broker_loggers(ebb_peer, kafka_peer):
    found = compare(broker_loggers, ebb_peer, kafka_peer, ALLOWED_HERE)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
