"""The topic config table: every topic config Ebb knows, with Kafka's name, type, default, checks,
documentation and broker-level synonyms, and whether Ebb acts on it.

*Effective* configs are fields of `LogConfig` (`broker/log/config.py`) and change how the partition
logs behave. *Stored-only* configs are not the log's: most are Kafka configs whose behaviour Ebb
does not implement (tiered storage, ...), validated, persisted, listed by DescribeConfigs and
otherwise ignored, so tools that set them keep working; three are read elsewhere from the topic's
configs (the throttled-replica lists by broker/replica/throttle.py, unclean.leader.election.enable
by the controller).

`describe_topic_configs` answers DescribeConfigs and CreateTopics v5+ for a topic: each config's
value, where it comes from (topic override, the broker's properties file, or the default) and its
synonyms, as Kafka's ConfigHelper reports them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from broker.java_math import java_double, java_int, java_trim
from broker.log.config import LogConfig
from protocol.enums import ConfigSource, ConfigType

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class InvalidConfig(ValueError):
    """A value a config does not accept; the message is Kafka's ConfigException wording."""


# --- value checks (Kafka's ConfigDef validators) ------------------------------------------------------

# parsed value (of the config's type: int, float, str, list[str]) -> problem, or None when fine
Check = Callable[[Any], str | None]


# Written as Kafka's Range validator compares, so that NaN passes as it does there.
def at_least(minimum: float) -> Check:
    return lambda v: f"Value must be at least {minimum}" if v < minimum else None


def between(low: float, high: float) -> Check:
    return lambda v: f"Value must be no less than {low} and no more than {high}" if v < low or v > high else None


def one_of(*allowed: str) -> Check:
    return lambda v: None if v in allowed else f"String must be one of: {', '.join(allowed)}"


def items_in(*allowed: str) -> Check:
    """Each item one of `allowed`; an empty list is allowed (Kafka 4.3: cleanup.policy= keeps everything)."""
    def check(items):
        bad = [i for i in items if i not in allowed]
        return f"Invalid value {','.join(bad)}, must be one of {', '.join(allowed)}" if bad else None

    return check


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be -1 or between 1 and 9"


_REPLICA_PAIR = re.compile(r"\s*([0-9]+)\s*:\s*([0-9]+)\s*")  # ASCII digits only, as Kafka's validator


def throttled_replica_pairs(items: Iterable[str]) -> list[tuple[int, int]] | None:
    """The (partition, broker) pairs of a throttled-replicas list other than '*'; None when an item is not
    such a pair."""
    pairs = []
    for item in items:
        match = _REPLICA_PAIR.fullmatch(item)
        if match is None:
            return None
        pairs.append((int(match[1]), int(match[2])))
    return pairs


def _throttled_replicas(items: list[str]) -> str | None:
    if items == ["*"] or throttled_replica_pairs(items) is not None:
        return None
    return "Value must be '*' or a list of partitionId:brokerId pairs"


def _committed_groups(items: list[str]) -> str | None:
    if "*" in items and len(items) > 1:
        return "'*' (every group) cannot be listed with named groups"
    return None


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: str | None  # Kafka's default, as text; None where Kafka has none
    doc: str
    broker_synonyms: tuple[str, ...] = ()  # broker properties that set the default, most specific first
    check: Check | None = None
    effective: bool = False  # a LogConfig field, acted on by the logs

    def parse(self, raw: object):
        """The value `raw` stands for, checked; InvalidConfig with Kafka's message if it is not one."""
        text = "" if raw is None else java_trim(str(raw))
        value = _parse(self.type, text, self.name, raw)
        if self.check is not None and value is not None:
            problem = self.check(value)
            if problem:
                raise InvalidConfig(f"Invalid value {raw} for configuration {self.name}: {problem}")
        return value

    def canonical(self, raw: object) -> str:
        """The value as Kafka writes it back (trimmed, list items joined by ',')."""
        text = render(self.type, self.parse(raw))
        assert text is not None  # parse() never gives None
        return text


def _parse(kind: ConfigType, text: str, name: str, raw: object):
    def fail(what: str):
        return InvalidConfig(f"Invalid value {raw} for configuration {name}: {what}")

    if kind is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise fail("Expected value to be either true or false")
        return text.lower() == "true"
    if kind in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        low, high = {ConfigType.INT: (INT32_MIN, INT32_MAX), ConfigType.LONG: (LONG_MIN, LONG_MAX),
                     ConfigType.SHORT: (-(2**15), 2**15 - 1)}[kind]
        try:
            value = java_int(text)
        except ValueError:
            raise fail(f"Not a number of type {kind.name}") from None
        if not low <= value <= high:
            raise fail(f"Not a number of type {kind.name}")
        return value
    if kind is ConfigType.DOUBLE:
        try:
            real = java_double(text)
        except ValueError:
            raise fail("Not a number of type DOUBLE") from None
        return real  # NaN passes Kafka's range checks (every comparison with it is false), and ours
    if kind is ConfigType.LIST:
        return [item.strip() for item in text.split(",") if item.strip()] if text else []
    return text


def render(kind: ConfigType, value) -> str | None:
    if value is None:
        return None
    if kind is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if kind is ConfigType.LIST:
        return ",".join(value)
    if kind is ConfigType.DOUBLE:
        return "NaN" if math.isnan(value) else repr(float(value))
    return str(value)


_MAX = str(LONG_MAX)
_WEEK_MS = str(7 * 24 * 3600 * 1000)

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in [
    # --- effective: LogConfig fields --------------------------------------------------------------------
    TopicConfigDef(
        "cleanup.policy", ConfigType.LIST, "delete",
        "How old data goes: 'delete' removes old segments by retention.ms, retention.bytes and "
        "retention.min.timestamp and allows DeleteRecords; 'compact' keeps the latest record of each key "
        "(the log cleaner) and refuses records without a key; a topic without 'delete' refuses DeleteRecords "
        "(POLICY_VIOLATION).",
        ("log.cleanup.policy",), items_in("compact", "delete"), effective=True),
    TopicConfigDef(
        "erasure.max.delay.ms", ConfigType.LONG, "-1",
        "Ebb's own: the longest time the bytes of records below the log start offset stay in this partition's "
        "files on any replica. When the start moves inside a segment (DeleteRecords, retention, "
        "retention.committed.groups), the segment's remaining batches are rewritten into a new file and the old "
        "one is removed without waiting file.delete.delay.ms; whole segments below the start are removed at once. "
        "A batch holding the start offset is kept whole. -1 (the default) turns erasure off.",
        ("log.erasure.max.delay.ms",), at_least(-1), effective=True),
    TopicConfigDef(
        "file.delete.delay.ms", ConfigType.LONG, "60000",
        "Time to wait before removing a deleted segment's files from the file system.",
        ("log.segment.delete.delay.ms",), at_least(0), effective=True),
    TopicConfigDef(
        "flush.messages", ConfigType.LONG, _MAX,
        "Force an fsync of the log after this many messages; by default Ebb, like Kafka, leaves "
        "durability to replication and the OS.",
        ("log.flush.interval.messages",), at_least(1), effective=True),
    TopicConfigDef(
        "flush.ms", ConfigType.LONG, _MAX,
        "Force an fsync of the log when this much time has passed since the last one.",
        ("log.flush.interval.ms",), at_least(0), effective=True),
    TopicConfigDef(
        "index.interval.bytes", ConfigType.INT, "4096",
        "How many bytes of records go between two offset-index entries.",
        ("log.index.interval.bytes",), at_least(0), effective=True),
    TopicConfigDef(
        "max.message.bytes", ConfigType.INT, "1048588",
        "The largest record batch size allowed in this topic (after compression).",
        ("message.max.bytes",), at_least(0), effective=True),
    TopicConfigDef(
        "compression.type", ConfigType.STRING, "producer",
        "The codec the topic's batches are stored with: 'producer' keeps each batch as sent; a codec "
        "(or 'uncompressed') recompresses the batches that arrive with another one.",
        ("compression.type",), one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), effective=True),
    TopicConfigDef(
        "compression.gzip.level", ConfigType.INT, "-1",
        "Compression level for gzip when the broker recompresses (-1: zlib's default).",
        ("compression.gzip.level",), _gzip_level, effective=True),
    TopicConfigDef(
        "compression.lz4.level", ConfigType.INT, "9",
        "Compression level for lz4 when the broker recompresses.",
        ("compression.lz4.level",), between(1, 17), effective=True),
    TopicConfigDef(
        "compression.zstd.level", ConfigType.INT, "3",
        "Compression level for zstd when the broker recompresses.",
        ("compression.zstd.level",), between(-131072, 22), effective=True),
    TopicConfigDef(
        "message.timestamp.after.max.ms", ConfigType.LONG, "3600000",
        "How far in the future a CreateTime record's timestamp may be; later ones are refused (INVALID_TIMESTAMP).",
        ("log.message.timestamp.after.max.ms",), at_least(0), effective=True),
    TopicConfigDef(
        "message.timestamp.before.max.ms", ConfigType.LONG, _MAX,
        "How far in the past a CreateTime record's timestamp may be; earlier ones are refused (INVALID_TIMESTAMP).",
        ("log.message.timestamp.before.max.ms",), at_least(0), effective=True),
    TopicConfigDef(
        "message.timestamp.type", ConfigType.STRING, "CreateTime",
        "Whether record timestamps are the producer's (CreateTime) or the broker's append time (LogAppendTime).",
        ("log.message.timestamp.type",), one_of("CreateTime", "LogAppendTime"), effective=True),
    TopicConfigDef(
        "min.insync.replicas", ConfigType.INT, "1",
        "Fewest in-sync replicas for an acks=all write: with fewer the leader refuses it (NOT_ENOUGH_REPLICAS), "
        "and one that waited while the ISR shrank below it is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND. A "
        "single broker is one in-sync replica.",
        ("min.insync.replicas",), at_least(1), effective=True),
    TopicConfigDef(
        "retention.bytes", ConfigType.LONG, "-1",
        "Under cleanup.policy=delete, the size a partition may grow to before its oldest segments are "
        "deleted; -1 means no size limit.",
        ("log.retention.bytes",), None, effective=True),
    TopicConfigDef(
        "retention.min.timestamp", ConfigType.LONG, None,
        "Ebb's own: an absolute retention floor in Unix milliseconds. Under cleanup.policy=delete, the oldest "
        "segments whose newest record is older than this timestamp are deleted and the log start offset moves "
        "past them, whatever retention.ms and retention.bytes say. Unset (or -1) means no floor. A change takes "
        "effect at once: the topic's partitions run a retention pass when it is altered.",
        ("log.retention.min.timestamp",), at_least(-1), effective=True),
    TopicConfigDef(
        "retention.committed.groups", ConfigType.LIST, "",
        "Ebb's own: under cleanup.policy=delete, move the log start offset up to the smallest offset that "
        "these consumer groups have committed, as DeleteRecords would, so records every listed group has "
        "consumed go. '*' means every group that has committed an offset on the partition or has live "
        "members reading the topic. A listed (or live) group without a commit on a partition holds that "
        "partition back. Empty (the default) trims nothing.",
        ("log.retention.committed.groups",), _committed_groups, effective=True),
    TopicConfigDef(
        "retention.ms", ConfigType.LONG, _WEEK_MS,
        "Under cleanup.policy=delete, how long a segment is kept after its newest record's timestamp; "
        "-1 means no time limit.",
        ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), at_least(-1), effective=True),
    TopicConfigDef(
        "segment.bytes", ConfigType.INT, str(1024 * 1024 * 1024),
        "The size of one log segment file; a new segment is rolled when it would grow past this.",
        ("log.segment.bytes",), at_least(1024 * 1024), effective=True),
    TopicConfigDef(
        "segment.index.bytes", ConfigType.INT, str(10 * 1024 * 1024),
        "The size of the offset and time index files preallocated for each segment.",
        ("log.index.size.max.bytes",), at_least(4), effective=True),
    TopicConfigDef(
        "segment.ms", ConfigType.LONG, _WEEK_MS,
        "Roll a new segment after this much time even if the current one is not full, so retention can "
        "delete or compact it.",
        ("log.roll.ms", "log.roll.hours"), at_least(1), effective=True),
    TopicConfigDef(
        "delete.retention.ms", ConfigType.LONG, "86400000",
        "How long a tombstone (a null value) stays in a compacted topic after the cleaner first kept it, so "
        "consumers reading from the start still see the deletion.",
        ("log.cleaner.delete.retention.ms",), at_least(0), effective=True),
    TopicConfigDef(
        "max.compaction.lag.ms", ConfigType.LONG, _MAX,
        "Longest time a record in a closed segment stays uncompacted: past it the log is cleaned whatever "
        "its dirty ratio.",
        ("log.cleaner.max.compaction.lag.ms",), at_least(1), effective=True),
    TopicConfigDef(
        "min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5",
        "Share of a compacted log's bytes not yet cleaned above which the log cleaner cleans it.",
        ("log.cleaner.min.cleanable.ratio",), between(0, 1), effective=True),
    TopicConfigDef(
        "min.compaction.lag.ms", ConfigType.LONG, "0",
        "Shortest time a record stays uncompacted: segments holding a newer record are not cleaned yet.",
        ("log.cleaner.min.compaction.lag.ms",), at_least(0), effective=True),
    # --- stored only: accepted, persisted and listed; Ebb does not act on them ---------------------------
    TopicConfigDef(
        "follower.replication.throttled.replicas", ConfigType.LIST, "",
        "Replicas whose follower-side replication is throttled: partitionId:brokerId pairs or '*'.",
        (), _throttled_replicas),
    TopicConfigDef(
        "leader.replication.throttled.replicas", ConfigType.LIST, "",
        "Replicas whose leader-side replication is throttled: partitionId:brokerId pairs or '*'.",
        (), _throttled_replicas),
    TopicConfigDef(
        "local.retention.bytes", ConfigType.LONG, "-2",
        "Tiered storage: bytes kept locally before upload (Ebb has no tiered storage).",
        ("log.local.retention.bytes",), at_least(-2)),
    TopicConfigDef(
        "local.retention.ms", ConfigType.LONG, "-2",
        "Tiered storage: time kept locally before upload (Ebb has no tiered storage).",
        ("log.local.retention.ms",), at_least(-2)),
    TopicConfigDef(
        "preallocate", ConfigType.BOOLEAN, "false",
        "Whether segment files are preallocated on disk when rolled (Ebb does not).",
        ("log.preallocate",)),
    TopicConfigDef(
        "remote.log.copy.disable", ConfigType.BOOLEAN, "false",
        "Tiered storage: stop copying segments to remote storage (Ebb has no tiered storage).", ()),
    TopicConfigDef(
        "remote.log.delete.on.disable", ConfigType.BOOLEAN, "false",
        "Tiered storage: delete remote data when tiering is turned off (Ebb has no tiered storage).", ()),
    TopicConfigDef(
        "remote.storage.enable", ConfigType.BOOLEAN, "false",
        "Tiered storage for this topic. Ebb has none, so only false is accepted.",
        (), lambda v: "Tiered storage is not available in Ebb" if v else None),
    TopicConfigDef(
        "segment.jitter.ms", ConfigType.LONG, "0",
        "The most a segment's time-based roll comes before segment.ms: each new segment draws its own "
        "jitter below this (and below segment.ms), so partitions created together do not roll together.",
        ("log.roll.jitter.ms", "log.roll.jitter.hours"), at_least(0), effective=True),
    TopicConfigDef(
        "unclean.leader.election.enable", ConfigType.BOOLEAN, "false",
        "Whether the controller may make an out-of-sync replica leader when no in-sync one is alive "
        "(acknowledged records may then be lost).",
        ("unclean.leader.election.enable",)),
]}

# Ebb's own escape hatch, for its tests of segment rolling and retention: off by default, it lets
# segment.bytes and log.segment.bytes go down to one batch header instead of Kafka 4.3's 1 MiB.
SMALL_SEGMENTS_SETTING = "ebb.testing.small.segments.enable"
SMALL_SEGMENT_BYTES_MIN = 61


def with_segment_rule(definition: TopicConfigDef, small_segments: bool) -> TopicConfigDef:
    """`definition`, with the small-segment minimum if it is segment.bytes' (or its broker property's)
    and the escape hatch is on."""
    if small_segments and definition.name in ("segment.bytes", "log.segment.bytes"):
        return replace(definition, check=at_least(SMALL_SEGMENT_BYTES_MIN))
    return definition


EFFECTIVE_CONFIGS = frozenset(name for name, d in TOPIC_CONFIGS.items() if d.effective)
STORED_ONLY_DEFAULTS: dict[str, str | None] = {name: d.default for name, d in TOPIC_CONFIGS.items()
                                               if not d.effective}
# Broker properties that only set the default of a stored-only topic config (their main synonym).
STORED_ONLY_BROKER_PROPERTIES: dict[str, str] = {d.broker_synonyms[0]: name for name, d in TOPIC_CONFIGS.items()
                                                 if not d.effective and d.broker_synonyms}

_LOG_CONFIG_FIELDS = {f.metadata["property"]: f.name for f in fields(LogConfig)}
assert EFFECTIVE_CONFIGS == set(_LOG_CONFIG_FIELDS), "every LogConfig field needs a row in TOPIC_CONFIGS"


def is_list(name: str) -> bool:
    d = TOPIC_CONFIGS.get(name)
    return d is not None and d.type is ConfigType.LIST


def validate_overrides(overrides: Mapping[str, object], *, small_segments: bool = False) -> dict[str, str]:
    """Check topic config overrides one by one; the canonical text of each. InvalidConfig names the first
    bad key the way Kafka does ("Unknown topic config name: x", "Invalid value ...")."""
    clean: dict[str, str] = {}
    for key, raw in overrides.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {key}")
        clean[key] = with_segment_rule(definition, small_segments).canonical(raw)
    return clean


def log_config_value(log_config: LogConfig, name: str) -> str | None:
    """A LogConfig field as Kafka's text."""
    value = getattr(log_config, _LOG_CONFIG_FIELDS[name])
    if isinstance(value, tuple):
        return ",".join(value)
    return None if value is None else str(value)


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    synonyms: tuple[Synonym, ...]
    type: ConfigType
    doc: str | None
    read_only: bool = False
    sensitive: bool = False


@dataclass(frozen=True)
class BrokerLayers:
    """The broker properties set anywhere, by where they were set; a property set in more than one
    place takes the first in Kafka's precedence: this broker's dynamic value, the cluster-wide dynamic
    default, the properties file (Kafka's defaults come after all three)."""

    per_broker: Mapping[str, str]  # /config/brokers/<id>: DYNAMIC_BROKER_CONFIG
    cluster_default: Mapping[str, str]  # /config/brokers/<default>: DYNAMIC_DEFAULT_BROKER_CONFIG
    static: Mapping[str, str]  # server.properties and overrides: STATIC_BROKER_CONFIG
    defaults: Mapping[str, str | None]  # Kafka's defaults (DEFAULT_CONFIG), None where it has none

    def sources(self) -> tuple[tuple[Mapping[str, str], ConfigSource], ...]:
        return ((self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (self.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self.static, ConfigSource.STATIC_BROKER_CONFIG))

    def merged(self) -> dict[str, str]:
        """What is in force, each property from its highest layer."""
        return {**self.static, **self.cluster_default, **self.per_broker}


def stored_only_default(name: str, broker_properties: Mapping[str, str]) -> str | None:
    """The broker-wide default of a stored-only config: its broker property if set, else Kafka's."""
    d = TOPIC_CONFIGS[name]
    if d.broker_synonyms and d.broker_synonyms[0] in broker_properties:
        return d.canonical(broker_properties[d.broker_synonyms[0]])
    return d.default


# Broker properties Kafka defines without a default (another property supplies it: log.retention.hours
# for log.retention.ms, ...): Kafka lists no DEFAULT_CONFIG synonym under them, and neither does Ebb.
BROKER_PROPERTIES_WITHOUT_DEFAULT = frozenset({
    "log.retention.ms", "log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms",
})


def layered_synonyms(names: Iterable[str], layers: BrokerLayers) -> list[Synonym]:
    """Kafka's ConfigHelper.configSynonyms: for each source in precedence order, each of `names` set
    there; then Kafka's defaults; nothing before the first name itself (a static log.retention.hours
    without log.retention.ms lists no synonym under retention.ms; checked against Kafka 4.3)."""
    names = list(names)
    found = [Synonym(n, values[n], source) for values, source in layers.sources() for n in names if n in values]
    found += [Synonym(n, layers.defaults[n], ConfigSource.DEFAULT_CONFIG) for n in names
              if layers.defaults.get(n) is not None]
    while found and found[0].name != names[0]:
        found.pop(0)
    return found


def _broker_synonyms(d: TopicConfigDef, layers: BrokerLayers) -> list[Synonym]:
    """The broker properties behind a topic config, as Kafka lists them."""
    return layered_synonyms(d.broker_synonyms, layers) if d.broker_synonyms else []


def describe_topic_configs(overrides: Mapping[str, str], log_config: LogConfig, broker_layers: BrokerLayers,
                           names: Iterable[str] | None = None) -> list[ConfigEntry]:
    """Every topic config (or those in `names`), sorted by name, as DescribeConfigs reports it.

    `overrides` are the topic's own settings, `log_config` its effective LogConfig, and
    `broker_layers` the broker properties set dynamically or in the properties file; everything else
    is Kafka's default (DEFAULT_CONFIG).
    """
    wanted = sorted(TOPIC_CONFIGS) if names is None else sorted(set(names) & set(TOPIC_CONFIGS))
    entries = []
    for name in wanted:
        d = TOPIC_CONFIGS[name]
        synonyms: list[Synonym] = []
        if name in overrides:
            synonyms.append(Synonym(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        synonyms += _broker_synonyms(d, broker_layers)
        if d.effective:
            value = log_config_value(log_config, name)
        elif name in overrides:
            value = overrides[name]
        else:
            value = stored_only_default(name, broker_layers.merged())
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, tuple(synonyms), d.type, d.doc))
    return entries
