"""controller_mutation_rate (KIP-599) against Kafka 4.3.1, at every version of CreateTopics (2-7),
CreatePartitions (0-3) and DeleteTopics (1-6) both serve: strict from CreateTopics v6, CreatePartitions
v3 and DeleteTopics v5 (a topic refused THROTTLING_QUOTA_EXCEEDED once the client's bucket is below
zero), permissive below (every topic taken, the answer throttled). Each version's client id has its
own quota of 1 partition/s, so its bucket starts full at 11 (controller.quota.window.num 11 x 1 s): a
topic of 20 partitions, more than the whole burst, is taken and leaves the bucket 9 below zero, and
the next topic meets an exhausted quota. validate_only requests are charged as the real ones.

The answers are compared field by field as every scenario's; throttle_time_ms, which the runner
leaves out, is asserted on each broker by itself: 0 while the bucket was not below zero before the
answer, else the time the refill needs to bring it back to zero (9 s less the little time since, or 10 s
once the second topic was taken too). Each request goes over a connection of its own: both brokers
mute a throttled client's connection for its throttle time. Topics Metadata creates are charged too
(auto_creation)."""

from __future__ import annotations

import pytest

from protocol.messages import AlterClientQuotasRequest as Alter
from protocol.messages import (
    ApiMessage,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    MetadataRequest,
)
from protocol.messages import DescribeClientQuotasRequest as Describe
from tests.broker.wire_client import WireClient
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED, _config_difference, topic
from tests.differential.test_client_quotas_against_kafka import _entity, _in_force, _op
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

BIG = 20  # partitions: more than the burst of 11
THROTTLING_QUOTA_EXCEEDED = 89
CREATE_VERSIONS, GROW_VERSIONS, DELETE_VERSIONS = range(2, 8), range(0, 4), range(1, 7)
CLIENTS = ([f"create-v{v}" for v in CREATE_VERSIONS] + [f"grow-v{v}" for v in GROW_VERSIONS]
           + [f"delete-v{v}" for v in DELETE_VERSIONS] + ["validate-create", "validate-grow"])
Grow = CreatePartitionsRequest.CreatePartitionsTopic


def _as(peer: Peer, client_id: str, label: str, body: ApiMessage, version: int) -> ApiMessage:
    with WireClient(peer.port, timeout=30, client_id=client_id) as client:
        return peer.record(label, client.send(body, version))


def _throttle(peer: Peer, label: str, answer: ApiMessage, low: int, high: int) -> None:
    throttle = answer.throttle_time_ms
    assert low <= throttle <= high, f"{peer.name}, {label}: throttle_time_ms {throttle} not in [{low}, {high}]"


def _errors(answer: ApiMessage, results: str) -> dict[str, int]:
    return {r.name: r.error_code for r in getattr(answer, results)}


def mutations(peer: Peer) -> None:
    quotas = [(_entity(client_id=c), [_op("controller_mutation_rate", 1.0)]) for c in CLIENTS]
    peer.send(Alter(entries=[Alter.EntryData(entity=e, ops=ops) for e, ops in quotas], validate_only=False), 1)
    _in_force(peer, len(CLIENTS))

    for v in CREATE_VERSIONS:
        label = f"create v{v}"
        answer = _as(peer, f"create-v{v}", label, CreateTopicsRequest(
            topics=[topic(f"c{v}-big", BIG), topic(f"c{v}-small")], timeout_ms=30_000), v)
        strict = v >= 6
        expected = THROTTLING_QUOTA_EXCEEDED if strict else 0
        assert _errors(answer, "topics") == {f"c{v}-big": 0, f"c{v}-small": expected}, f"{peer.name}: {answer}"
        _throttle(peer, label, answer, *((8000, 9000) if strict else (9000, 10000)))

    for v in GROW_VERSIONS:  # Kafka's controller takes a request's topics in its own order: one per request
        peer.send(CreateTopicsRequest(topics=[topic(f"g{v}-big"), topic(f"g{v}-small")], timeout_ms=30_000), 7)
        strict = v >= 3
        for name, count, (low, high) in ((f"g{v}-big", 1 + BIG, (0, 0) if strict else (8000, 9000)),
                                         (f"g{v}-small", 2, (7000, 9000) if strict else (8000, 10000))):
            label = f"create partitions {name} v{v}"
            answer = _as(peer, f"grow-v{v}", label, CreatePartitionsRequest(
                topics=[Grow(name=name, count=count, assignments=None)], timeout_ms=30_000, validate_only=False), v)
            refused = strict and name.endswith("small")
            assert _errors(answer, "results") == {name: THROTTLING_QUOTA_EXCEEDED if refused else 0}, \
                f"{peer.name}: {answer}"
            _throttle(peer, label, answer, low, high)

    for v in DELETE_VERSIONS:
        peer.send(CreateTopicsRequest(topics=[topic(f"d{v}-big", BIG), topic(f"d{v}-small")], timeout_ms=30_000), 7)
        strict = v >= 5
        for name, low, high in ((f"d{v}-big", 0, 0) if strict else (f"d{v}-big", 8000, 9000),
                                (f"d{v}-small", 7000, 9000) if strict else (f"d{v}-small", 8000, 10000)):
            label = f"delete {name} v{v}"
            body = (DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name)], timeout_ms=30_000)
                    if v >= 6 else DeleteTopicsRequest(topic_names=[name], timeout_ms=30_000))
            answer = _as(peer, f"delete-v{v}", label, body, v)
            refused = strict and name.endswith("small")
            assert _errors(answer, "responses") == {name: THROTTLING_QUOTA_EXCEEDED if refused else 0}, \
                f"{peer.name}: {answer}"
            _throttle(peer, label, answer, low, high)

    for step, name, partitions, (low, high) in ((1, "v-big", BIG, (0, 0)), (2, "v-small", 1, (8000, 9000))):
        label = f"create, validate only {step}"
        answer = _as(peer, "validate-create", label, CreateTopicsRequest(
            topics=[topic(name, partitions)], timeout_ms=30_000, validate_only=True), 7)
        _throttle(peer, label, answer, low, high)
    peer.send(CreateTopicsRequest(topics=[topic("vg")], timeout_ms=30_000), 7)
    for step, count, (low, high) in ((1, 1 + BIG, (0, 0)), (2, 2, (8000, 9000))):
        label = f"create partitions, validate only {step}"
        answer = _as(peer, "validate-grow", label, CreatePartitionsRequest(
            topics=[Grow(name="vg", count=count, assignments=None)], timeout_ms=30_000, validate_only=True), 3)
        _throttle(peer, label, answer, low, high)


def auto_creation(peer: Peer) -> None:
    """A topic Metadata would create (auto.create.topics.enable, true on both) is charged to its client
    strictly: Kafka's broker forwards the creation to its controller as a CreateTopics in the client's
    name. Past the burst it is not created, and the topic stays unknown."""
    quota = Alter.EntryData(entity=_entity(client_id="auto"), ops=[_op("controller_mutation_rate", 1.0)])
    peer.send(Alter(entries=[quota], validate_only=False), 1)
    described = Describe(components=[Describe.ComponentData(entity_type="client-id", match_type=0, match="auto")],
                         strict=True)
    wait_for(lambda: bool(peer.send(described, 1).entries), what=f"{peer.name}: the quota in force")
    _as(peer, "auto", "create past the burst", CreateTopicsRequest(topics=[topic("a-big", BIG)], timeout_ms=30_000),
        7)
    wanted = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="a-new")],
                             allow_auto_topic_creation=True)
    answer = _as(peer, "auto", "metadata creating a topic over the quota", wanted, 12)
    _throttle(peer, "metadata creating a topic over the quota", answer, 0, 0)
    wanted.allow_auto_topic_creation = False
    peer.ask("the topic was not created", wanted, 12)


def test_controller_mutation_quotas(ebb_peer, kafka_peer):
    found = compare(mutations, ebb_peer, kafka_peer, ALLOWED, ignore=_config_difference)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


def test_auto_created_topics(ebb_peer, kafka_peer):
    found = compare(auto_creation, ebb_peer, kafka_peer, ALLOWED, ignore=_config_difference)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
