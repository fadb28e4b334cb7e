"""Client metrics subscriptions (KIP-714's CLIENT_METRICS config resource, type 16): Kafka 4.3.1's
three configs, its checks, where they live and what DescribeConfigs reports.

An operator names a subscription (`kafka-client-metrics --alter --name ...`) and gives it the metric
name prefixes to collect (`metrics`, a list; "*" for all), how often clients push them (`interval.ms`)
and which clients it applies to (`match`: `<selector>=<regex>` items). Kafka stores, lists and
describes them whether or not a metrics reporter able to receive client telemetry is configured; with
none (Kafka's default, and Ebb, which has no such reporter) no client is ever sent a subscription:
GetTelemetrySubscriptions and PushTelemetry are not advertised (docs/features.md).

Values live in the metadata store at `/config/client-metrics/<name>` (cluster/layout.py, where Kafka's
ZooKeeper mode kept them), read on every describe and written by compare-and-set, so every broker of a
cluster answers the same at once. A subscription left with no config has no node (and is not listed).

Checks, in Kafka's order: an empty name, then a name outside the table (both INVALID_REQUEST); then
each value by its type in the table's order (a list with an empty item, a non-int interval:
INVALID_CONFIG); then the interval's bounds (INVALID_REQUEST); then each match item (INVALID_CONFIG).
A match regex is judged as Java's Pattern.compile judges it (broker/java_regex.py; docs/features.md
says where that may still differ). Kafka judges the operations before the name: APPEND to an unnamed
subscription is INVALID_CONFIG, as on a named one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import structlog

from broker.cluster.layout import ConfigEntityTypeZNode, ConfigEntityZNode
from broker.cluster.layout import ConfigType as EntityType
from broker.cluster.store import MetadataStore
from broker.java_math import java_trim
from broker.java_regex import JavaRegexError, check_java_regex
from broker.topic_configs import ConfigEntry, InvalidConfig, Synonym, TopicConfigDef
from protocol.enums import ConfigSource, ConfigType
from protocol.errors import CodedError, ErrorCode

log = structlog.get_logger("client_metrics_configs")

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
INTERVAL_MS_BOUNDS = (100, 3_600_000)  # 100 ms to an hour, both allowed
# What a match item may select on: the client's identity as it tells it in its telemetry requests.
MATCH_SELECTORS = frozenset({"client_instance_id", "client_id", "client_software_name", "client_software_version",
                             "client_source_address", "client_source_port"})

# In Kafka's definition order, which is the order values are parsed (and so which error comes first).
CLIENT_METRICS_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in [
    TopicConfigDef(METRICS, ConfigType.LIST, "",
                   "The prefixes of the metric names the subscribed clients push; * for every metric."),
    TopicConfigDef(INTERVAL_MS, ConfigType.INT, "300000",
                   "How often, in milliseconds, the subscribed clients push their metrics."),
    TopicConfigDef(MATCH, ConfigType.LIST, "",
                   "Which clients the subscription is for: <selector>=<regex> items, all of which must match."),
]}


class ClientMetricsError(CodedError):
    """A subscription refused: INVALID_REQUEST or INVALID_CONFIG, as Kafka answers each check."""


def validate(name: str, configs: Mapping[str, object]) -> dict[str, str]:
    """A subscription's whole config set checked as Kafka 4.3.1 checks it; the canonical text of each
    value (ints without blanks, list items trimmed and joined by ','). ClientMetricsError otherwise."""
    if not name:
        raise ClientMetricsError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    unknown = [key for key in configs if key not in CLIENT_METRICS_CONFIGS]
    if unknown:
        raise ClientMetricsError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {unknown[0]}")
    clean = {}
    for key, definition in CLIENT_METRICS_CONFIGS.items():
        if key not in configs:
            continue
        raw = configs[key]
        text = "" if raw is None else java_trim(str(raw))
        if definition.type is ConfigType.LIST and text and any(not item.strip() for item in text.split(",")):
            raise ClientMetricsError(ErrorCode.INVALID_CONFIG, f"Configuration '{key}' values must not be empty.")
        try:
            clean[key] = definition.canonical(raw)
        except InvalidConfig as exc:
            raise ClientMetricsError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if INTERVAL_MS in clean:
        low, high = INTERVAL_MS_BOUNDS
        if not low <= int(clean[INTERVAL_MS]) <= high:
            raise ClientMetricsError(ErrorCode.INVALID_REQUEST, f"Invalid value {clean[INTERVAL_MS]} for "
                                     f"{INTERVAL_MS}, interval must be between {low} and {high} (1 hour)")
    if clean.get(MATCH):
        for item in clean[MATCH].split(","):
            match_pattern(item)
    return clean


def match_pattern(item: str) -> tuple[str, str]:
    """One match item, `<selector>=<regex>`, as (selector, regex), the regex one Java compiles (Ebb
    never runs it). One '=' exactly: Java's split, which Kafka uses, drops trailing empty parts, so
    `client_id=` has no regex either (and no regex can hold an '=')."""
    parts = item.split("=")
    while parts and parts[-1] == "":
        parts.pop()
    if len(parts) != 2 or java_trim(parts[0]) not in MATCH_SELECTORS:
        raise ClientMetricsError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {item}")
    regex = java_trim(parts[1])
    try:
        check_java_regex(regex)
    except JavaRegexError:
        raise ClientMetricsError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {item}") from None
    return java_trim(parts[0]), regex


def describe(configs: Mapping[str, str]) -> list[ConfigEntry]:
    """Every client metrics config, sorted by name: the subscription's value (CLIENT_METRICS_CONFIG,
    itself its one synonym) or Kafka's default (DEFAULT_CONFIG, no synonym)."""
    entries = []
    for name in sorted(CLIENT_METRICS_CONFIGS):
        d = CLIENT_METRICS_CONFIGS[name]
        if name in configs:
            value = configs[name]
            synonyms: tuple[Synonym, ...] = (Synonym(name, value, ConfigSource.CLIENT_METRICS_CONFIG),)
            entries.append(ConfigEntry(name, value, ConfigSource.CLIENT_METRICS_CONFIG, synonyms, d.type, d.doc))
        else:
            entries.append(ConfigEntry(name, d.default, ConfigSource.DEFAULT_CONFIG, (), d.type, d.doc))
    return entries


class ClientMetricsConfigs:
    """The client metrics subscriptions in the metadata store, read through (every broker answers the same)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._lock = asyncio.Lock()  # one change written at a time from this broker

    async def get(self, name: str) -> dict[str, str]:
        return await ConfigEntityZNode.read(self.store, EntityType.CLIENT_METRICS, name)

    async def names(self) -> list[str]:
        """The subscriptions that have configs (ListConfigResources)."""
        return await ConfigEntityTypeZNode.names(self.store, EntityType.CLIENT_METRICS)

    async def describe(self, name: str) -> list[ConfigEntry]:
        return describe(await self.get(name))

    async def alter(self, name: str, change: Callable[[dict[str, str]], dict[str, str]], *,
                    validate_only: bool = False) -> None:
        """Replace the subscription's configs with `change(current)`, validated (ClientMetricsError);
        written only if nobody changed them meanwhile (another broker may alter the same one)."""
        if not name:  # refused before anything is read, after the operations (APPEND: INVALID_CONFIG), as Kafka
            validate(name, change({}))

        def validated(current: dict[str, str]) -> dict[str, str] | None:
            clean = validate(name, change(current))  # checked also when only validating
            return None if validate_only else clean

        async with self._lock:
            written = await ConfigEntityZNode.replace(
                self.store, ConfigEntityZNode.path(EntityType.CLIENT_METRICS, name), validated, drop_empty=True)
        if written is not None:
            log.info("altered client metrics subscription", name=name, configs=written)
