"""Client quotas against Kafka 4.3.1: AlterClientQuotas and DescribeClientQuotas at both versions both
serve (0 and 1): quotas set, removed and replaced on users, client ids, their defaults and pairs of them,
and ip entities; what a describe matches (exact names, defaults, any name, strict or not); every refusal
Kafka makes (an empty entity, an unknown type, an empty name, ip beside a user, an unresolvable host, a
key the entity does not take, a value not above 0, fractional or too large, a key named twice) and
validate_only; and a consumer over its consumer_byte_rate, answered with no data, sessionless or not.
Kafka applies an alteration once its metadata log reaches the broker, so each change is
awaited (unrecorded) before it is described. Kafka answers entities, and the parts of each, in its hash
maps' order: both answers are sorted before they are compared."""

from __future__ import annotations

import pytest

from protocol.messages import AlterClientQuotasRequest as Alter
from protocol.messages import ApiMessage, CreateTopicsRequest
from protocol.messages import DescribeClientQuotasRequest as Describe
from protocol.records import build_batch
from tests.broker.data_wire import fetch_request, produce_request
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED, T0, topic
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

Entry, Op = Alter.EntryData, Alter.EntryData.OpData
NAN = float("nan")  # Kafka's checks compare as Java does: NaN passes them


def _entity(**parts: str | None) -> list:
    return [Entry.EntityData(entity_type=kind.replace("_", "-"), entity_name=name) for kind, name in parts.items()]


def _op(key: str, value: float | None) -> Op:
    return Op(key=key, value=0.0 if value is None else value, remove=value is None)


def _sorted(answer: ApiMessage) -> ApiMessage:
    for entry in answer.entries or []:
        entry.entity.sort(key=lambda part: part.entity_type)
        if hasattr(entry, "values"):
            entry.values.sort(key=lambda value: value.key)
    if answer.entries:
        answer.entries.sort(key=lambda entry: repr([(p.entity_type, p.entity_name) for p in entry.entity]))
    return answer


def _alter(peer: Peer, label: str, *entries: tuple[list, list], version: int, validate_only: bool = False) -> None:
    body = Alter(entries=[Entry(entity=e, ops=ops) for e, ops in entries], validate_only=validate_only)
    peer.record(label, _sorted(peer.send(body, version)))


def _component(kind: str, match_type: int, match: str | None = None) -> Describe.ComponentData:
    return Describe.ComponentData(entity_type=kind, match_type=match_type, match=match)


def _describe(peer: Peer, label: str, *components: Describe.ComponentData, strict: bool = False,
              version: int = 1) -> None:
    peer.record(label, _sorted(peer.send(Describe(components=list(components), strict=strict), version)))


def _in_force(peer: Peer, count: int) -> None:
    """Wait until the broker describes `count` quota entities, unrecorded."""
    def arrived() -> bool:
        return len(peer.send(Describe(components=[], strict=False), 1).entries) == count
    wait_for(arrived, timeout_s=30, what=f"{peer.name}: {count} quota entities in force")


def setting_and_describing(peer: Peer) -> None:
    for version in (0, 1):
        user, client = f"alice-{version}", f"app-{version}"
        _alter(peer, f"set v{version}", (_entity(user=user), [_op("producer_byte_rate", 1024),
                                                              _op("request_percentage", 12.5)]),
               (_entity(user=user, client_id=client), [_op("consumer_byte_rate", 2048)]),
               (_entity(user=None), [_op("producer_byte_rate", 512)]),
               (_entity(user=None, client_id=None), [_op("controller_mutation_rate", 2.5)]),
               (_entity(client_id=client), [_op("consumer_byte_rate", 4096)]),
               (_entity(client_id=None), [_op("producer_byte_rate", 10_000_000)]),
               (_entity(ip="10.20.30.40"), [_op("connection_creation_rate", 7)]),
               (_entity(ip=None), [_op("connection_creation_rate", 100)]), version=version)
        _in_force(peer, 8)
        _describe(peer, f"everything v{version}", version=version)
        _describe(peer, f"everything, strict v{version}", strict=True, version=version)
        _describe(peer, f"the user v{version}", _component("user", 0, user), version=version)
        _describe(peer, f"the user alone v{version}", _component("user", 0, user), strict=True, version=version)
        _describe(peer, f"default user v{version}", _component("user", 1), version=version)
        _describe(peer, f"default user alone v{version}", _component("user", 1), strict=True, version=version)
        _describe(peer, f"any user v{version}", _component("user", 2), version=version)
        _describe(peer, f"any user with any client v{version}", _component("user", 2), _component("client-id", 2),
                  strict=True, version=version)
        _describe(peer, f"the client v{version}", _component("client-id", 0, client), version=version)
        _describe(peer, f"default client alone v{version}", _component("client-id", 1), strict=True,
                  version=version)
        _describe(peer, f"any ip v{version}", _component("ip", 2), version=version)
        _describe(peer, f"an ip never set v{version}", _component("ip", 0, "1.1.1.1"), version=version)
        _alter(peer, f"replace and remove v{version}",
               (_entity(user=user), [_op("producer_byte_rate", 2000), _op("request_percentage", None)]),
               (_entity(user=user, client_id=client), [_op("consumer_byte_rate", None), _op("never_set", None)]),
               version=version)
        _in_force(peer, 7)
        _describe(peer, f"after replace v{version}", _component("user", 2), version=version)
        _alter(peer, f"remove the rest v{version}", (_entity(user=user), [_op("producer_byte_rate", None)]),
               (_entity(user=None), [_op("producer_byte_rate", None)]),
               (_entity(user=None, client_id=None), [_op("controller_mutation_rate", None)]),
               (_entity(client_id=client), [_op("consumer_byte_rate", None)]),
               (_entity(client_id=None), [_op("producer_byte_rate", None)]),
               (_entity(ip="10.20.30.40"), [_op("connection_creation_rate", None)]),
               (_entity(ip=None), [_op("connection_creation_rate", None)]), version=version)
        _in_force(peer, 0)
        _describe(peer, f"nothing left v{version}", version=version)


def test_setting_and_describing(ebb_peer, kafka_peer):
    found = compare(setting_and_describing, ebb_peer, kafka_peer, ALLOWED)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


REFUSED = [
    ("empty entity", _entity(), [_op("producer_byte_rate", 1)]),
    ("unknown type", _entity(group="g"), [_op("producer_byte_rate", 1)]),
    ("empty user", _entity(user=""), [_op("producer_byte_rate", 1)]),
    ("empty client", _entity(client_id=""), [_op("producer_byte_rate", 1)]),
    ("ip with user", _entity(user="u", ip="1.2.3.4"), [_op("producer_byte_rate", 1)]),
    ("unresolvable host", _entity(ip="no-such-host.invalid"), [_op("connection_creation_rate", 1)]),
    ("ip key on a user", _entity(user="u"), [_op("connection_creation_rate", 1)]),
    ("user key on an ip", _entity(ip="1.2.3.4"), [_op("producer_byte_rate", 1)]),
    ("unknown key", _entity(client_id="c"), [_op("consumer_byte_rate_typo", 1)]),
    ("zero", _entity(client_id="c"), [_op("producer_byte_rate", 0)]),
    ("negative", _entity(client_id="c"), [_op("request_percentage", -1)]),
    ("fraction", _entity(client_id="c"), [_op("consumer_byte_rate", 1.5)]),
    ("too large for a long", _entity(client_id="c"), [_op("producer_byte_rate", 1e19)]),
    ("too large for an int", _entity(ip="1.2.3.4"), [_op("connection_creation_rate", 3e9)]),
    ("fraction for an int", _entity(ip="1.2.3.4"), [_op("connection_creation_rate", 2.5)]),
    ("key twice", _entity(client_id="c"), [_op("producer_byte_rate", 1), _op("producer_byte_rate", 2)]),
]


def refusals(peer: Peer) -> None:
    for version in (0, 1):
        for label, entity, ops in REFUSED:
            _alter(peer, f"{label} v{version}", (entity, ops), version=version)
        _alter(peer, f"validate only v{version}", (_entity(client_id="dry"), [_op("producer_byte_rate", 5)]),
               (_entity(client_id="dry-bad"), [_op("producer_byte_rate", 0)]), version=version, validate_only=True)
        _alter(peer, f"NaN, validate only v{version}", (_entity(client_id="c"), [_op("producer_byte_rate", NAN)]),
               (_entity(ip="1.2.3.4"), [_op("connection_creation_rate", NAN)]), version=version, validate_only=True)
        _alter(peer, f"nothing v{version}", version=version)
    _describe(peer, "nothing was written")
    for label, components in [
        ("empty type", [_component("", 2)]),
        ("type twice", [_component("user", 2), _component("user", 0, "bob")]),
        ("unknown type", [_component("group", 2)]),
        ("unknown match type", [_component("user", 5)]),
        ("exact without a name", [_component("user", 0)]),
        ("default with a name", [_component("client-id", 1, "x")]),
        ("any with a name", [_component("client-id", 2, "x")]),
        ("ip with a user", [_component("ip", 2), _component("user", 2)]),
    ]:
        for version in (0, 1):
            _describe(peer, f"filter: {label} v{version}", *components, strict=True, version=version)


def test_refusals(ebb_peer, kafka_peer):
    found = compare(refusals, ebb_peer, kafka_peer, ALLOWED)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


def throttled_consumer(peer: Peer) -> None:
    """The peer's own client id under consumer_byte_rate 1,000 B/s: a Fetch may read 10 windows' worth
    (10,000 B), takes the one 12 KB batch anyway (KIP-74), which is over the quota at once: both answer
    no data (the throttle time itself is each broker's, not compared), also to a request for a new
    fetch session, which neither creates."""
    peer.send(CreateTopicsRequest(topics=[topic("throttled")], timeout_ms=30_000), 7)
    peer.wait_for_leaders("throttled", 1)
    data = build_batch([(None, b"t" * 12_000, [], T0)])
    assert peer.send(produce_request("throttled", 0, data, acks=-1), 9).responses[0] \
        .partition_responses[0].error_code == 0
    client_id = peer.client.client_id
    entry = [(_entity(client_id=client_id), [_op("consumer_byte_rate", 1000)])]
    _alter(peer, "consumer quota", *entry, version=1)
    _in_force(peer, 1)
    for label, epoch in (("a fetch over the quota", -1), ("a new session over the quota", 0)):
        answer = peer.ask(label, fetch_request("throttled", 0, 0, session_epoch=epoch), 12)
        assert answer.throttle_time_ms > 0 and answer.responses == [], f"{peer.name}: {answer}"
    _alter(peer, "quota removed", (_entity(client_id=client_id), [_op("consumer_byte_rate", None)]), version=1)
    _in_force(peer, 0)
    peer.ask("a fetch without the quota", fetch_request("throttled", 0, 0), 12)


def test_a_throttled_consumer(ebb_peer, kafka_peer):
    found = compare(throttled_consumer, ebb_peer, kafka_peer, ALLOWED)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)

