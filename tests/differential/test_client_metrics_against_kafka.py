"""Client metrics subscriptions (KIP-714's CLIENT_METRICS config resource, type 16) against Kafka 4.3.1:
described before and after they are set, set and deleted with IncrementalAlterConfigs (v0-1) and
replaced with AlterConfigs (v0-2), listed with ListConfigResources (v0, and v1 by type), and every
refusal Kafka makes (an unknown config, an interval out of range or not a number, a bad match selector
or regex, an empty list item, APPEND and SUBTRACT, an empty name). Kafka applies an alteration when its
metadata log reaches the broker, so each change is awaited (unrecorded) before it is read back. Neither
broker advertises GetTelemetrySubscriptions (71) or PushTelemetry (72): Kafka does only with a metrics
reporter able to take client telemetry, which it has none of by default."""

from __future__ import annotations

import pytest

from protocol.messages import (
    AlterConfigsRequest,
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    ListConfigResourcesRequest,
)
from protocol.messages import IncrementalAlterConfigsRequest as Incremental
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

CLIENT_METRICS = 16
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
Resource = DescribeConfigsRequest.DescribeConfigsResource
Legacy = AlterConfigsRequest.AlterConfigsResource
Alter = Incremental.AlterConfigsResource
Op = Alter.AlterableConfig
# The runner compares only whether an error carries a message; here the words are Kafka's own and
# judged too: each peer's refusals, (label, code, message), in order.
REFUSALS: dict[str, list[tuple[str, int, str | None]]] = {}


def _refusals(peer: Peer, label: str, answer) -> None:
    results = answer.results if isinstance(answer, DescribeConfigsResponse) else answer.responses
    REFUSALS.setdefault(peer.name, []).extend(
        (label, r.error_code, r.error_message) for r in results if r.error_code)


def _describe(peer: Peer, label: str, name: str, version: int = 4, keys: list[str] | None = None,
              synonyms: bool = True, documentation: bool = False) -> None:
    _refusals(peer, label, peer.ask(label, DescribeConfigsRequest(resources=[Resource(
        resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=documentation), version))


def _incremental(peer: Peer, label: str, name: str, *ops: tuple[str, int, str | None], version: int = 1,
                 validate_only: bool = False) -> None:
    _refusals(peer, label, peer.ask(label, Incremental(resources=[Alter(
        resource_type=CLIENT_METRICS, resource_name=name, configs=[
            Op(name=k, config_operation=o, value=v) for k, o, v in ops])], validate_only=validate_only), version))


def _legacy(peer: Peer, label: str, name: str, version: int, configs: dict[str, str],
            validate_only: bool = False) -> None:
    _refusals(peer, label, peer.ask(label, AlterConfigsRequest(resources=[Legacy(
        resource_type=CLIENT_METRICS, resource_name=name, configs=[
            Legacy.AlterableConfig(name=k, value=v) for k, v in configs.items()])], validate_only=validate_only),
        version))


def _in_force(peer: Peer, name: str, expected: dict[str, str]) -> None:
    """Wait until the subscription's own configs read back as `expected`, unrecorded."""
    def arrived() -> bool:
        [result] = peer.send(DescribeConfigsRequest(resources=[Resource(
            resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None)]), 4).results
        return {c.name: c.value for c in result.configs if c.config_source == 7} == expected
    wait_for(arrived, timeout_s=30, what=f"{peer.name}: client metrics {name} in force")


def _list(peer: Peer, label: str, version: int, types: list[int] | None = None) -> None:
    body = ListConfigResourcesRequest() if version == 0 else ListConfigResourcesRequest(resource_types=types)
    answer = peer.send(body, version)
    # Kafka lists them in its hash map's order: compared as a set
    answer.config_resources.sort(key=lambda r: (r.resource_type, r.resource_name))
    peer.record(label, answer)


def _ignore_documentation(path: str) -> bool:
    return path.endswith(".documentation")  # each config's documentation is in Ebb's own words


def describing_and_altering(peer: Peer) -> None:
    versions = peer.send(ApiVersionsRequest(client_software_name="ebb-test", client_software_version="1"), 3)
    peer.record("telemetry APIs advertised", ApiVersionsResponse(error_code=versions.error_code, api_keys=[
        k for k in versions.api_keys if k.api_key in (71, 72)]))
    for version in range(1, 5):
        _describe(peer, f"a subscription never set v{version}", "never-was", version)
        _describe(peer, f"without synonyms v{version}", "never-was", version, synonyms=False)
        _describe(peer, f"an empty name v{version}", "", version)
    for version in (0, 1):
        name = f"inc-{version}"
        _incremental(peer, f"set v{version}", name, ("metrics", SET, " org.apache.kafka.producer. , *"),
                     ("interval.ms", SET, " 1000 "),
                     ("match", SET, "client_id=abc.*, client_software_name = apache-kafka-java"), version=version)
        _in_force(peer, name, {"metrics": "org.apache.kafka.producer.,*", "interval.ms": "1000",
                               "match": "client_id=abc.*,client_software_name = apache-kafka-java"})
        for described in range(1, 5):
            _describe(peer, f"after set v{version}, described v{described}", name, described)
        _describe(peer, f"some keys v{version}", name, keys=["interval.ms", "no.such.config"])
        _incremental(peer, f"delete one and an unknown v{version}", name, ("interval.ms", DELETE, None),
                     ("no.such.config", DELETE, None), version=version)
        _in_force(peer, name, {"metrics": "org.apache.kafka.producer.,*",
                               "match": "client_id=abc.*,client_software_name = apache-kafka-java"})
        _describe(peer, f"after delete v{version}", name)
        _incremental(peer, f"validate only v{version}", name, ("interval.ms", SET, "3600000"), version=version,
                     validate_only=True)
        _incremental(peer, f"a match ending in '=' v{version}", name, ("match", SET, "client_id=a="),
                     version=version, validate_only=True)
        _incremental(peer, f"empty values v{version}", "emptied", ("metrics", SET, ""), ("match", SET, " "),
                     version=version)
    _in_force(peer, "emptied", {"metrics": "", "match": ""})
    _describe(peer, "empty values described", "emptied")
    _describe(peer, "validated only, not stored", "inc-1", keys=["interval.ms"])
    for version in (0, 1, 2):
        name = f"legacy-{version}"
        _legacy(peer, f"legacy set v{version}", name, version, {"metrics": "a.b", "interval.ms": "2000"})
        _in_force(peer, name, {"metrics": "a.b", "interval.ms": "2000"})
        _legacy(peer, f"legacy replace v{version}", name, version, {"match": "client_source_port=9092"})
        _in_force(peer, name, {"match": "client_source_port=9092"})
        _describe(peer, f"after legacy replace v{version}", name)
        _legacy(peer, f"legacy refused v{version}", name, version, {"interval.ms": "50"})
        _legacy(peer, f"legacy empty name v{version}", "", version, {"metrics": "a"})
        _legacy(peer, f"legacy nothing v{version}", f"nothing-{version}", version, {})
    _list(peer, "listed v0", 0)
    for types in ([16], [], [16, 2], [16, 5]):
        _list(peer, f"listed v1 {types}", 1, types)
    for name in ("inc-0", "inc-1", "legacy-0", "legacy-1", "legacy-2", "emptied"):  # delete = every config gone
        _incremental(peer, f"delete {name}", name, ("metrics", DELETE, None), ("interval.ms", DELETE, None),
                     ("match", DELETE, None))
        _in_force(peer, name, {})
    _describe(peer, "after delete", "inc-0")
    _list(peer, "listed v0 after delete", 0)
    _list(peer, "listed v1 after delete", 1, [16])


def test_describing_and_altering(ebb_peer, kafka_peer):
    REFUSALS.clear()
    found = compare(describing_and_altering, ebb_peer, kafka_peer, ALLOWED, ignore=_ignore_documentation)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
    assert REFUSALS["ebb"] == REFUSALS["kafka"]


REFUSED = [
    ("an unknown config", ("metricz", SET, "a")),
    ("an interval under 100", ("interval.ms", SET, "99")),
    ("an interval over an hour", ("interval.ms", SET, "3600001")),
    ("a negative interval", ("interval.ms", SET, "-5")),
    ("an interval beyond an int", ("interval.ms", SET, "2147483648")),
    ("an interval not a number", ("interval.ms", SET, "soon")),
    ("an empty interval", ("interval.ms", SET, "")),
    ("an interval with an underscore", ("interval.ms", SET, "1_000")),
    ("a match without a regex", ("match", SET, "client_id")),
    ("a match with an empty regex", ("match", SET, "client_id=")),
    ("a match on an unknown selector", ("match", SET, "client_name=x")),
    ("a match with no selector", ("match", SET, "=x")),
    ("a match with two '='", ("match", SET, "client_id=a=b")),
    ("a match with a bad regex", ("match", SET, "client_software_version=[1-")),
    ("a Python-only named group", ("match", SET, "client_id=(?P<n>a)")),
    ("a Python-only comment group", ("match", SET, "client_id=(?#c)a")),
    ("braces Python reads as literals", ("match", SET, "client_id={foo}")),
    ("a Python-only escape", ("match", SET, "client_id=\\U0001F600")),
    ("a Python-only flag", ("match", SET, "client_id=(?a)a")),
    ("an unknown Java property", ("match", SET, "client_id=\\p{Lx}")),
    ("a match with an empty item", ("match", SET, "client_id=a,,client_id=b")),
    ("metrics with an empty item", ("metrics", SET, "a,,b")),
    ("metrics of commas only", ("metrics", SET, " ,")),
    ("append to metrics", ("metrics", APPEND, "a")),
    ("subtract from match", ("match", SUBTRACT, "client_id=a")),
    ("append to the interval", ("interval.ms", APPEND, "5")),
]


def refusals(peer: Peer) -> None:
    for label, op in REFUSED:
        _incremental(peer, label, "refused", op)
    _incremental(peer, "an empty name", "", ("metrics", SET, "a"))
    _incremental(peer, "an empty name, deleting", "", ("metrics", DELETE, None))
    _incremental(peer, "an empty name, appending", "", ("metrics", APPEND, "a"))
    _incremental(peer, "an empty name, subtracting", "", ("match", SUBTRACT, "client_id=a"))
    _incremental(peer, "an unknown config before a bad regex", "refused", ("match", SET, "client_id=["),
                 ("metricz", SET, "a"))
    _incremental(peer, "a bad interval before a bad regex", "refused", ("match", SET, "client_id=["),
                 ("interval.ms", SET, "5"))
    _incremental(peer, "not a number before a bad regex", "refused", ("match", SET, "client_id=["),
                 ("interval.ms", SET, "soon"))
    _incremental(peer, "one bad among good ones", "refused", ("metrics", SET, "a"), ("interval.ms", SET, "0"))
    _incremental(peer, "a null value", "refused", ("metrics", SET, None))
    _incremental(peer, "a key twice", "refused", ("metrics", SET, "a"), ("metrics", SET, "b"))
    for regex in ("\\p{L}+", "\\p{Alpha}", "\\Qa.b\\E", "(?<n>a)\\k<n>", "a(?i)b", "\\h\\R\\z\\G\\X", "\\x{41}\\e\\cA",
                  "(?U)[\\d-z]\\8", "[a-z&&[^b]]"):  # Java's own, which Python's re refused
        _incremental(peer, f"a Java-only regex {regex}", "refused", ("match", SET, f"client_id={regex}"),
                     validate_only=True)
    _describe(peer, "nothing was stored", "refused")


def test_refusals(ebb_peer, kafka_peer):
    REFUSALS.clear()
    found = compare(refusals, ebb_peer, kafka_peer, ALLOWED)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
    assert REFUSALS["ebb"] == REFUSALS["kafka"]
