"""Group configs (KIP-848's GROUP config resource, type 32): Kafka 4.3.1's table, its checks, where the
values live, and what DescribeConfigs reports.

Kafka 4.3 keeps per-group overrides of the settings of its new group protocols: consumer groups of the
KIP-848 protocol (`consumer.*`), share groups (KIP-932, `share.*`) and streams groups (KIP-1071,
`streams.*`). A classic group (JoinGroup/SyncGroup) reads none of them: its members bring their own
session timeout. Kafka still accepts, stores and describes them for any group id, one that exists or
not, of any protocol. Ebb does the same: every name of Kafka's table is validated as Kafka validates it,
stored and described; the `share.*` ones drive share groups, the consumer session timeout, heartbeat
interval and assignment interval drive KIP-848 groups (`member_timeouts`, read through a watch per
group: `followed`), and the others change nothing
(docs/features.md). A name Kafka does not know is
refused (INVALID_CONFIG, "Unknown group config name").

Values live in the metadata store at `/config/groups/<group>` (cluster/layout.py), read on every
describe and written by compare-and-set, so every broker of a cluster answers the same at once.

Checks, as Kafka's GroupConfig.validate: each value parsed by its type and minimum; then, over the
group's values on top of the broker's (the `group.consumer.*`, `group.share.*` and `group.streams.*`
properties, whose minimum and maximum bound each value), each value within its bounds, and each
session timeout above its heartbeat interval. The broker properties are read from server.properties
at start (GROUP_BROKER_DEFAULTS are Kafka 4.3.1's defaults).
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog

from broker.cluster.layout import ConfigEntityTypeZNode, ConfigEntityZNode
from broker.cluster.layout import ConfigType as EntityType
from broker.cluster.store import MetadataStore, Watch
from broker.topic_configs import (
    BrokerLayers,
    ConfigEntry,
    InvalidConfig,
    Synonym,
    TopicConfigDef,
    at_least,
    layered_synonyms,
    one_of,
)
from protocol.enums import ConfigSource, ConfigType

log = structlog.get_logger("group_configs")

_C, _S, _T = "group.consumer.", "group.share.", "group.streams."
# KIP-848 consumer groups' server-side assignors (group.consumer.assignors), by short name; Kafka's class
# names are taken too. Custom assignors are not served.
UNIFORM_ASSIGNOR, RANGE_ASSIGNOR = "uniform", "range"
ASSIGNORS = (UNIFORM_ASSIGNOR, RANGE_ASSIGNOR)
ASSIGNOR_CLASS_NAMES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM_ASSIGNOR,
                        "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE_ASSIGNOR}
# group.consumer.migration.policy: which way a group with members may migrate online
# (broker/group/consumer_migration.py); an empty group changes protocol whatever the policy, as in Kafka.
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
# The broker properties behind group configs (synonyms and bounds), Kafka 4.3.1's defaults. Ebb reads
# them from server.properties; of them only the three assignment intervals are dynamic too, as in Kafka
# (broker/dynamic_config.py: the `intervals` a GroupConfigs is given).
GROUP_BROKER_DEFAULTS: dict[str, str] = {
    _C + "session.timeout.ms": "45000", _C + "min.session.timeout.ms": "45000",
    _C + "max.session.timeout.ms": "60000",
    _C + "heartbeat.interval.ms": "5000", _C + "min.heartbeat.interval.ms": "5000",
    _C + "max.heartbeat.interval.ms": "15000",
    _C + "assignment.interval.ms": "1000", _C + "min.assignment.interval.ms": "0",
    _C + "max.assignment.interval.ms": "15000",
    _S + "session.timeout.ms": "45000", _S + "min.session.timeout.ms": "45000", _S + "max.session.timeout.ms": "60000",
    _S + "heartbeat.interval.ms": "5000", _S + "min.heartbeat.interval.ms": "5000",
    _S + "max.heartbeat.interval.ms": "15000",
    _S + "record.lock.duration.ms": "30000", _S + "min.record.lock.duration.ms": "15000",
    _S + "max.record.lock.duration.ms": "60000",
    _S + "delivery.count.limit": "5", _S + "min.delivery.count.limit": "2", _S + "max.delivery.count.limit": "10",
    _S + "partition.max.record.locks": "2000", _S + "min.partition.max.record.locks": "100",
    _S + "max.partition.max.record.locks": "4000",
    _S + "assignment.interval.ms": "1000", _S + "min.assignment.interval.ms": "0",
    _S + "max.assignment.interval.ms": "15000",
    _T + "session.timeout.ms": "45000", _T + "min.session.timeout.ms": "45000", _T + "max.session.timeout.ms": "60000",
    _T + "heartbeat.interval.ms": "5000", _T + "min.heartbeat.interval.ms": "5000",
    _T + "max.heartbeat.interval.ms": "15000",
    _T + "num.standby.replicas": "0", _T + "max.standby.replicas": "2",
    _T + "initial.rebalance.delay.ms": "3000",
    _T + "assignment.interval.ms": "1000", _T + "min.assignment.interval.ms": "0",
    _T + "max.assignment.interval.ms": "15000",
}


def _reset_strategy(value: str) -> str | None:
    """share.auto.offset.reset: earliest, latest or by_duration:<ISO-8601 duration, not negative>."""
    if value in ("earliest", "latest"):
        return None
    if value.startswith("by_duration:") and _DURATION.fullmatch(value[len("by_duration:"):]):
        return None
    return (f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


# Java's Duration.parse without a sign in front (Kafka refuses a negative duration).
_DURATION = re.compile(r"\+?P(?:\+?\d+D)?(?:T(?=[+\d])(?:\+?\d+H)?(?:\+?\d+M)?(?:\+?\d+(?:[.,]\d{0,9})?S)?)?",
                       re.IGNORECASE)


def _int(name: str, broker: str | None, minimum: int, doc: str) -> TopicConfigDef:
    default = GROUP_BROKER_DEFAULTS[broker] if broker else None
    return TopicConfigDef(name, ConfigType.INT, default, doc, (broker,) if broker else (), at_least(minimum))


GROUP_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in [
    _int("consumer.session.timeout.ms", _C + "session.timeout.ms", 1,
         "How long a member of a consumer group (KIP-848 protocol) may go without a heartbeat."),
    _int("consumer.heartbeat.interval.ms", _C + "heartbeat.interval.ms", 1,
         "How often members of a consumer group (KIP-848 protocol) are told to heartbeat."),
    _int("consumer.assignment.interval.ms", _C + "assignment.interval.ms", 0,
         "The least time between two assignment computations of a consumer group (KIP-848 protocol)."),
    _int("share.session.timeout.ms", _S + "session.timeout.ms", 1,
         "How long a member of a share group may go without a heartbeat."),
    _int("share.heartbeat.interval.ms", _S + "heartbeat.interval.ms", 1,
         "How often members of a share group are told to heartbeat."),
    _int("share.record.lock.duration.ms", _S + "record.lock.duration.ms", 1000,
         "How long a share group member holds a record it was given before it goes back to the others."),
    _int("share.delivery.count.limit", _S + "delivery.count.limit", 2,
         "How many times a share group delivers a record before giving up on it."),
    _int("share.partition.max.record.locks", _S + "partition.max.record.locks", 100,
         "How many records of one partition a share group may hold in flight."),
    TopicConfigDef("share.auto.offset.reset", ConfigType.STRING, "latest",
                   "Where a share group starts reading a partition it has no position in: earliest, latest "
                   "or by_duration:<ISO-8601 duration> before now.", (), _reset_strategy),
    TopicConfigDef("share.isolation.level", ConfigType.STRING, "read_uncommitted",
                   "Whether a share group delivers records of open and aborted transactions (read_uncommitted) "
                   "or only committed ones (read_committed).", (), one_of("read_committed", "read_uncommitted")),
    TopicConfigDef("share.renew.acknowledge.enable", ConfigType.BOOLEAN, "true",
                   "Whether members of a share group may renew the lock on a record they hold."),
    _int("share.assignment.interval.ms", _S + "assignment.interval.ms", 0,
         "The least time between two assignment computations of a share group."),
    _int("streams.session.timeout.ms", _T + "session.timeout.ms", 1,
         "How long a member of a streams group may go without a heartbeat."),
    _int("streams.heartbeat.interval.ms", _T + "heartbeat.interval.ms", 1,
         "How often members of a streams group are told to heartbeat."),
    _int("streams.num.standby.replicas", _T + "num.standby.replicas", 0,
         "How many standby copies of each task's state a streams group keeps."),
    _int("streams.initial.rebalance.delay.ms", _T + "initial.rebalance.delay.ms", 0,
         "How long a new streams group waits for more members before its first assignment."),
    _int("streams.assignment.interval.ms", _T + "assignment.interval.ms", 0,
         "The least time between two assignment computations of a streams group."),
]}

# Group configs whose value, when the group sets none, is the broker property's in force (Kafka's
# extractGroupConfigMap); the others fall back to Kafka's own default of the group config.
_FOLLOW_BROKER = frozenset({
    "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.session.timeout.ms",
    "share.heartbeat.interval.ms", "share.record.lock.duration.ms", "share.delivery.count.limit",
    "share.partition.max.record.locks", "streams.session.timeout.ms", "streams.heartbeat.interval.ms",
    "streams.num.standby.replicas", "streams.initial.rebalance.delay.ms"})
# name -> (broker property of the minimum or None, of the maximum, checked only when the group sets it)
_BOUNDS: dict[str, tuple[str | None, str, bool]] = {
    "consumer.heartbeat.interval.ms": (_C + "min.heartbeat.interval.ms", _C + "max.heartbeat.interval.ms", False),
    "consumer.session.timeout.ms": (_C + "min.session.timeout.ms", _C + "max.session.timeout.ms", False),
    "consumer.assignment.interval.ms": (_C + "min.assignment.interval.ms", _C + "max.assignment.interval.ms", True),
    "share.heartbeat.interval.ms": (_S + "min.heartbeat.interval.ms", _S + "max.heartbeat.interval.ms", False),
    "share.session.timeout.ms": (_S + "min.session.timeout.ms", _S + "max.session.timeout.ms", False),
    "share.record.lock.duration.ms": (_S + "min.record.lock.duration.ms", _S + "max.record.lock.duration.ms", False),
    "share.delivery.count.limit": (_S + "min.delivery.count.limit", _S + "max.delivery.count.limit", False),
    "share.partition.max.record.locks": (_S + "min.partition.max.record.locks",
                                         _S + "max.partition.max.record.locks", False),
    "share.assignment.interval.ms": (_S + "min.assignment.interval.ms", _S + "max.assignment.interval.ms", True),
    "streams.heartbeat.interval.ms": (_T + "min.heartbeat.interval.ms", _T + "max.heartbeat.interval.ms", False),
    "streams.session.timeout.ms": (_T + "min.session.timeout.ms", _T + "max.session.timeout.ms", False),
    "streams.num.standby.replicas": (None, _T + "max.standby.replicas", False),
    "streams.assignment.interval.ms": (_T + "min.assignment.interval.ms", _T + "max.assignment.interval.ms", True),
}
_SESSION_OVER_HEARTBEAT = tuple((f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms")
                                for kind in ("consumer", "share", "streams"))


def group_broker_properties(properties: Mapping[str, str]) -> dict[str, int]:
    """The group.* broker properties in force (`properties` over Kafka's defaults), as numbers; ValueError
    naming the first that is not an int, or a default outside its own minimum and maximum."""
    values: dict[str, int] = {}
    for key, default in GROUP_BROKER_DEFAULTS.items():
        text = properties.get(key, default).strip()
        try:
            values[key] = int(text)
        except ValueError:
            raise ValueError(f"{key}: {text!r} is not a number of type INT") from None
    for name, (low, high, _) in _BOUNDS.items():  # the broker's own default within its bounds
        broker = GROUP_CONFIGS[name].broker_synonyms[0]
        if not (values[low] if low else 0) <= values[broker] <= values[high]:
            raise ValueError(f"{broker}: {values[broker]} is not between {low or 0} and {high}")
    return values


def validate(overrides: Mapping[str, object], broker: Mapping[str, int]) -> dict[str, str]:
    """A group's whole override set checked as Kafka 4.3.1 checks it; the canonical text of each value.
    InvalidConfig with Kafka's message otherwise."""
    unknown = [k for k in overrides if k not in GROUP_CONFIGS]
    if unknown:
        raise InvalidConfig(f"Unknown group config name: {unknown[0]}")
    clean = {name: d.canonical(overrides[name]) for name, d in GROUP_CONFIGS.items() if name in overrides}

    def value(name: str) -> int:
        if name in clean:
            return int(clean[name])
        definition = GROUP_CONFIGS[name]
        return broker[definition.broker_synonyms[0]] if name in _FOLLOW_BROKER else int(definition.default or 0)

    for name, (low, high, only_when_set) in _BOUNDS.items():
        if only_when_set and name not in clean:
            continue
        if low is not None and value(name) < broker[low]:
            raise InvalidConfig(f"{name} must be greater than or equal to {low}")
        if value(name) > broker[high]:
            raise InvalidConfig(f"{name} must be less than or equal to {high}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if value(session) <= value(heartbeat):
            raise InvalidConfig(f"{session} must be greater than {heartbeat}")
    return clean


def describe(overrides: Mapping[str, str], broker: Mapping[str, int], layers: BrokerLayers) -> list[ConfigEntry]:
    """Every group config, sorted by name, as Kafka's ConfigHelper reports one: the group's value
    (GROUP_CONFIG) before the broker property behind it in its layers, or before Kafka's default of
    the group config when no broker property stands behind it."""
    entries = []
    for name in sorted(GROUP_CONFIGS):
        d = GROUP_CONFIGS[name]
        if d.broker_synonyms:
            synonyms = layered_synonyms(d.broker_synonyms, layers)
        else:
            synonyms = [Synonym(name, d.default, ConfigSource.DEFAULT_CONFIG)]
        if name in overrides:
            value: str | None = overrides[name]
            synonyms.insert(0, Synonym(name, value, ConfigSource.GROUP_CONFIG))
        elif name in _FOLLOW_BROKER:
            value = str(broker[d.broker_synonyms[0]])
        else:
            value = d.default
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, tuple(synonyms), d.type, d.doc))
    return entries


FOLLOWED_GROUPS = 10_000  # groups whose configs a broker keeps watched for their heartbeats


@dataclass(frozen=True)
class MemberTimeouts:
    """A KIP-848 or share group member's session timeout and heartbeat interval, and its group's assignment
    interval (the least time between two target computations), as in force for its group."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    assignment_interval_ms: int


class GroupConfigs:
    """The groups' configs in the metadata store, read through (every broker answers the same)."""

    def __init__(self, store: MetadataStore, broker_properties: Mapping[str, int], *,
                 intervals: Callable[[], Mapping[str, int]] | None = None) -> None:
        """`intervals`: the group.*.assignment.interval.ms in force now (dynamic: DynamicBrokerConfig's
        group_intervals), else those of `broker_properties`."""
        self.store = store
        self.broker = broker_properties
        self._intervals = intervals if intervals is not None else lambda: broker_properties
        self._lock = asyncio.Lock()  # one change written at a time from this broker
        # Heartbeats' view: group -> (its configs, the watch keeping them current), least recent first.
        self._followed: OrderedDict[str, tuple[dict[str, str], Watch]] = OrderedDict()

    async def member_timeouts(self, group: str, protocol: str) -> MemberTimeouts:
        """`protocol` ("consumer" or "share"): the group's `<protocol>.session.timeout.ms`,
        `<protocol>.heartbeat.interval.ms` and `<protocol>.assignment.interval.ms`, else the broker's
        `group.<protocol>.*` (the assignment interval's as changed at runtime). StoreError if the group's
        configs cannot be read."""
        overrides = await self.followed(group) if group else {}
        session, interval = f"{protocol}.session.timeout.ms", f"{protocol}.heartbeat.interval.ms"
        assignment = f"{protocol}.assignment.interval.ms"
        return MemberTimeouts(int(overrides.get(session, self.broker[f"group.{session}"])),
                              int(overrides.get(interval, self.broker[f"group.{interval}"])),
                              int(overrides.get(assignment, self._intervals()[f"group.{assignment}"])))

    async def followed(self, group: str) -> dict[str, str]:
        """The group's configs for its heartbeats: read once, then kept current by a data watch, so that
        a heartbeat costs no store round trip. The FOLLOWED_GROUPS most recently asked are followed.
        StoreError if the first read fails."""
        if (entry := self._followed.get(group)) is not None:
            self._followed.move_to_end(group)
            return entry[0]
        current: dict[str, str] = {}

        def changed(data: bytes | None, _version: int | None) -> None:
            current.clear()
            current.update(ConfigEntityZNode.decode(data) if data else {})

        watch = await self.store.watch_data(ConfigEntityZNode.path(EntityType.GROUP, group), changed)
        if (entry := self._followed.get(group)) is not None:  # another heartbeat followed it meanwhile
            watch.cancel()
            return entry[0]
        self._followed[group] = (current, watch)
        if len(self._followed) > FOLLOWED_GROUPS:
            self._followed.popitem(last=False)[1][1].cancel()
        return current

    def stop(self) -> None:
        for _, watch in self._followed.values():
            watch.cancel()
        self._followed.clear()

    async def get(self, group: str) -> dict[str, str]:
        return await ConfigEntityZNode.read(self.store, EntityType.GROUP, group)

    async def group_ids(self) -> list[str]:
        """The groups that have configs (ListConfigResources)."""
        return await ConfigEntityTypeZNode.names(self.store, EntityType.GROUP)

    async def describe(self, group: str, layers: BrokerLayers) -> list[ConfigEntry]:
        return describe(await self.get(group), self.broker, layers)

    async def alter(self, group: str, change: Callable[[dict[str, str]], dict[str, str]], *,
                    validate_only: bool = False) -> None:
        """Replace the group's configs with `change(current)`, validated (InvalidConfig); written only if
        nobody changed them meanwhile (another broker may alter the same group): no lost update. A group
        left with no config has no node."""
        path = ConfigEntityZNode.path(EntityType.GROUP, group)

        def validated(current: dict[str, str]) -> dict[str, str] | None:
            clean = validate(change(current), self.broker)  # checked also when only validating
            return None if validate_only else clean

        async with self._lock:
            written = await ConfigEntityZNode.replace(self.store, path, validated, drop_empty=True)
        if written is not None:
            log.info("altered group configs", group=group, configs=written)
