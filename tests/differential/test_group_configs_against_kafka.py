"""Group configs (KIP-848's GROUP config resource, type 32) against Kafka 4.3.1: described for a group
with none set and for one that never existed, set, deleted and replaced with IncrementalAlterConfigs and
AlterConfigs at every version both serve, and every refusal Kafka makes (an unknown name, a value of the
wrong type or under its minimum, outside the broker's group.* bounds, a session timeout not above its
heartbeat interval, APPEND, an empty group id). Both brokers start with a static
group.consumer.session.timeout.ms and a wider group.consumer.max.session.timeout.ms, so the broker layer
under the group's values and the bounds are judged too. Kafka applies an alteration when its metadata
log reaches the broker, so each change is awaited (unrecorded) before it is described."""

from __future__ import annotations

import pytest

from protocol.messages import AlterConfigsRequest, DescribeConfigsRequest, ListConfigResourcesRequest
from protocol.messages import IncrementalAlterConfigsRequest as Incremental
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

GROUP_TYPE = 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
Resource = DescribeConfigsRequest.DescribeConfigsResource
Legacy = AlterConfigsRequest.AlterConfigsResource
Alter = Incremental.AlterConfigsResource
Op = Alter.AlterableConfig

ALLOWED_HERE = ALLOWED


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"group.consumer.session.timeout.ms": "50000", "group.consumer.max.session.timeout.ms": "90000"}


def _describe(peer: Peer, label: str, group: str, version: int = 4, keys: list[str] | None = None,
              synonyms: bool = True, documentation: bool = False) -> None:
    peer.ask(label, DescribeConfigsRequest(resources=[Resource(
        resource_type=GROUP_TYPE, resource_name=group, configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=documentation), version)


def _incremental(peer: Peer, label: str, group: str, *ops: tuple[str, int, str | None], version: int = 1,
                 validate_only: bool = False) -> None:
    peer.ask(label, Incremental(resources=[Alter(resource_type=GROUP_TYPE, resource_name=group, configs=[
        Op(name=k, config_operation=o, value=v) for k, o, v in ops])], validate_only=validate_only), version)


def _legacy(peer: Peer, label: str, group: str, version: int, validate_only: bool = False, **configs: str) -> None:
    peer.ask(label, AlterConfigsRequest(resources=[Legacy(resource_type=GROUP_TYPE, resource_name=group, configs=[
        Legacy.AlterableConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()])],
        validate_only=validate_only), version)


def _in_force(peer: Peer, group: str, **expected: str | None) -> None:
    """Wait until the group's configs read back as expected (None: not set on the group), unrecorded."""
    names = [k.replace("_", ".") for k in expected]

    def arrived() -> bool:
        [result] = peer.send(DescribeConfigsRequest(resources=[Resource(
            resource_type=GROUP_TYPE, resource_name=group, configuration_keys=names)]), 4).results
        mine = {c.name: c.value for c in result.configs if c.config_source == 8}
        return all(mine.get(k.replace("_", ".")) == v for k, v in expected.items())
    wait_for(arrived, timeout_s=30, what=f"{peer.name}: group configs of {group} in force")


def describing(peer: Peer) -> None:
    for version in range(1, 5):
        _describe(peer, f"a group that never was v{version}", "never-was", version)
        _describe(peer, f"without synonyms v{version}", "never-was", version, synonyms=False)
        _describe(peer, f"some keys v{version}", "never-was", version,
                  keys=["consumer.session.timeout.ms", "share.auto.offset.reset", "no.such.config"])
        _describe(peer, f"no group id v{version}", "", version)
    for version in (3, 4):
        _describe(peer, f"described with documentation v{version}", "never-was", version, documentation=True)
    peer.ask("the broker's group properties", DescribeConfigsRequest(resources=[Resource(
        resource_type=4, resource_name="1", configuration_keys=[
            "group.consumer.session.timeout.ms", "group.consumer.max.session.timeout.ms",
            "group.consumer.min.heartbeat.interval.ms", "group.share.delivery.count.limit",
            "group.streams.max.standby.replicas"])], include_synonyms=True), 4)


def test_describing(ebb_peer, kafka_peer):
    # Each config's documentation is in Ebb's own words (tests/broker/test_group_configs.py checks it is there).
    found = compare(describing, ebb_peer, kafka_peer, ALLOWED_HERE, ignore=lambda path: path.endswith(".documentation"))
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


def incremental(peer: Peer) -> None:
    for version in (0, 1):
        group = f"inc-{version}"
        _incremental(peer, f"set two v{version}", group, ("consumer.session.timeout.ms", SET, "80000"),
                     ("consumer.heartbeat.interval.ms", SET, "6000"), version=version)
        _in_force(peer, group, consumer_session_timeout_ms="80000", consumer_heartbeat_interval_ms="6000")
        _describe(peer, f"after set v{version}", group)
        _incremental(peer, f"share and streams v{version}", group, ("share.auto.offset.reset", SET, "earliest"),
                     ("share.isolation.level", SET, "read_committed"), ("share.renew.acknowledge.enable", SET, "FALSE"),
                     ("streams.num.standby.replicas", SET, "2"), ("share.record.lock.duration.ms", SET, " 20000 "),
                     version=version)
        _in_force(peer, group, share_isolation_level="read_committed")
        _describe(peer, f"after share and streams v{version}", group)
        _incremental(peer, f"delete one v{version}", group, ("consumer.heartbeat.interval.ms", DELETE, None),
                     ("no.such.config", DELETE, None), version=version)
        _in_force(peer, group, consumer_heartbeat_interval_ms=None)
        _describe(peer, f"after delete v{version}", group, keys=["consumer.heartbeat.interval.ms",
                                                                 "consumer.session.timeout.ms"])
        _incremental(peer, f"validate only v{version}", group, ("consumer.session.timeout.ms", SET, "60000"),
                     version=version, validate_only=True)
        _describe(peer, f"after validate only v{version}", group, keys=["consumer.session.timeout.ms"])
        _incremental(peer, f"no group id v{version}", "", ("consumer.session.timeout.ms", SET, "60000"),
                     version=version)


def test_incremental(ebb_peer, kafka_peer):
    found = compare(incremental, ebb_peer, kafka_peer, ALLOWED_HERE)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


def legacy(peer: Peer) -> None:
    for version in (0, 1, 2):
        group = f"legacy-{version}"
        _legacy(peer, f"set v{version}", group, version, consumer_heartbeat_interval_ms="7000",
                share_delivery_count_limit="3")
        _in_force(peer, group, consumer_heartbeat_interval_ms="7000", share_delivery_count_limit="3")
        _legacy(peer, f"replace v{version}", group, version, streams_initial_rebalance_delay_ms="0")
        _in_force(peer, group, consumer_heartbeat_interval_ms=None, streams_initial_rebalance_delay_ms="0")
        _describe(peer, f"after replace v{version}", group)
        _legacy(peer, f"a bad one v{version}", group, version, consumer_session_timeout_ms="1")
        _legacy(peer, f"validate only v{version}", group, version, validate_only=True,
                share_partition_max_record_locks="4000")
        _legacy(peer, f"no group id v{version}", "", version, consumer_session_timeout_ms="60000")
        _describe(peer, f"after the refusals v{version}", group, keys=["streams.initial.rebalance.delay.ms",
                                                                       "share.partition.max.record.locks"])


def test_legacy_alter(ebb_peer, kafka_peer):
    found = compare(legacy, ebb_peer, kafka_peer, ALLOWED_HERE)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


REFUSED = [
    ("an unknown name", ("no.such.config", SET, "1")),
    ("an assignor flag Kafka 4.3 does not list", ("consumer.assignor.offload.enable", SET, "true")),
    ("not a number", ("consumer.session.timeout.ms", SET, "soon")),
    ("beyond an int", ("consumer.session.timeout.ms", SET, "3000000000")),
    ("under the type's minimum", ("share.record.lock.duration.ms", SET, "999")),
    ("under the broker's minimum", ("consumer.session.timeout.ms", SET, "44999")),
    ("over the broker's maximum", ("consumer.session.timeout.ms", SET, "90001")),
    ("at the broker's maximum", ("consumer.session.timeout.ms", SET, "90000")),
    ("heartbeat under its minimum", ("consumer.heartbeat.interval.ms", SET, "4999")),
    ("heartbeat over its maximum", ("consumer.heartbeat.interval.ms", SET, "15001")),
    ("assignment interval over its maximum", ("consumer.assignment.interval.ms", SET, "15001")),
    ("assignment interval negative", ("share.assignment.interval.ms", SET, "-1")),
    ("share session under its minimum", ("share.session.timeout.ms", SET, "1000")),
    ("delivery count over its maximum", ("share.delivery.count.limit", SET, "11")),
    ("record locks under their minimum", ("share.partition.max.record.locks", SET, "99")),
    ("record locks over their maximum", ("share.partition.max.record.locks", SET, "4001")),
    ("standby replicas over their maximum", ("streams.num.standby.replicas", SET, "3")),
    ("standby replicas negative", ("streams.num.standby.replicas", SET, "-1")),
    ("streams heartbeat over its maximum", ("streams.heartbeat.interval.ms", SET, "15001")),
    ("a reset strategy Kafka does not know", ("share.auto.offset.reset", SET, "bogus")),
    ("a reset strategy in capitals", ("share.auto.offset.reset", SET, "EARLIEST")),
    ("a reset by duration", ("share.auto.offset.reset", SET, "by_duration:PT1H30M")),
    ("a reset by a negative duration", ("share.auto.offset.reset", SET, "by_duration:-PT1H")),
    ("a reset by no duration", ("share.auto.offset.reset", SET, "by_duration:")),
    ("an isolation level Kafka does not know", ("share.isolation.level", SET, "READ_COMMITTED")),
    ("not a boolean", ("share.renew.acknowledge.enable", SET, "yes")),
    ("append", ("consumer.session.timeout.ms", APPEND, "1")),
    ("subtract", ("share.isolation.level", SUBTRACT, "read_committed")),
]


def refusals(peer: Peer) -> None:
    for label, op in REFUSED:
        _incremental(peer, label, "refused", op, validate_only=True)
    _incremental(peer, "a session not above its heartbeat", "refused",
                 ("consumer.heartbeat.interval.ms", SET, "15000"), ("consumer.session.timeout.ms", SET, "15000"))
    _incremental(peer, "a streams heartbeat over the default session", "refused",
                 ("streams.heartbeat.interval.ms", SET, "15000"), ("streams.session.timeout.ms", SET, "14999"))
    _incremental(peer, "one bad among good ones", "refused", ("consumer.session.timeout.ms", SET, "60000"),
                 ("share.delivery.count.limit", SET, "1"))
    _describe(peer, "nothing was stored", "refused", keys=["consumer.session.timeout.ms", "share.delivery.count.limit"])


def listing(peer: Peer) -> None:
    """ListConfigResources (KIP-1142): the groups with configs (one set, one set and emptied again)."""
    _incremental(peer, "configs for one group", "listed", ("share.delivery.count.limit", SET, "3"))
    _incremental(peer, "configs for another", "emptied", ("share.delivery.count.limit", SET, "3"))
    _incremental(peer, "and back to none", "emptied", ("share.delivery.count.limit", DELETE, None))
    _in_force(peer, "listed", share_delivery_count_limit="3")
    _in_force(peer, "emptied", share_delivery_count_limit=None)
    for types in ([32], [8], [4], [16], [], [2, 5]):
        answer = peer.send(ListConfigResourcesRequest(resource_types=types), 1)
        # Kafka lists the groups in its hash map's order: compared as a set
        answer.config_resources.sort(key=lambda r: (r.resource_type, r.resource_name))
        peer.record(f"list {types or 'every type'}", answer)
    peer.ask("list v0 (client metrics)", ListConfigResourcesRequest(), 0)


def test_listing(ebb_peer, kafka_peer):
    found = compare(listing, ebb_peer, kafka_peer, ALLOWED_HERE)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


def test_refusals(ebb_peer, kafka_peer):
    found = compare(refusals, ebb_peer, kafka_peer, ALLOWED_HERE)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
