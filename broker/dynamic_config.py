"""Dynamic broker configs (KIP-226): broker properties changed at runtime, without a restart.

Values live in the metadata store where Kafka kept them in ZooKeeper: `/config/brokers/<id>` for one
broker, `/config/brokers/<default>` for the cluster-wide defaults, each `{"version": 1, "config": {...}}`.
Every broker watches its own node and the default one, so a change made through any broker (or written
by another tool) is in force on all of them at once. Precedence, as in Kafka: this broker's dynamic
value, then the cluster-wide default, then server.properties, then Kafka's default.

What may change, as Kafka 4.3 classifies it: the broker-level defaults of topic configs (`log.*`,
`message.max.bytes`, `min.insync.replicas`, ...; Kafka's DynamicLogConfig) and the replication
throttles, per broker or cluster-wide. Ebb does not throttle replication: the rates are validated,
stored and reported only. Any other broker property is refused by name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any

import structlog

from broker.cluster.layout import BrokerConfigZNode, ConfigEntityZNode
from broker.cluster.store import MetadataStore, NoNode, Watch
from broker.config import (
    STORED_ONLY_BROKER_PROPERTIES,
    TOPIC_DEFAULTS,
    UNCLEAN_ELECTION,
    BrokerConfig,
    ConfigError,
    ReplicationConfig,
    broker_defaults_with,
    default_broker_properties,
    topic_defaults_from,
)
from broker.log.config import LogConfig
from broker.topic_configs import (
    TOPIC_CONFIGS,
    BrokerLayers,
    InvalidConfig,
    TopicConfigDef,
    at_least,
    stored_only_default,
    with_segment_rule,
)
from protocol.enums import ConfigType

log = structlog.get_logger("dynamic_config")

DEFAULT_ENTITY = BrokerConfigZNode.DEFAULT  # the cluster-wide node under /config/brokers


# Broker property -> how a value is checked (the topic config's type and rule, under the broker's name).
_THROTTLE = TopicConfigDef("", ConfigType.LONG, None, "", check=at_least(0))
DYNAMIC_BROKER_CONFIGS: dict[str, TopicConfigDef] = {
    **{broker: replace(TOPIC_CONFIGS[topic], name=broker) for broker, topic in TOPIC_DEFAULTS.items()},
    **{broker: replace(TOPIC_CONFIGS[topic], name=broker) for broker, topic in STORED_ONLY_BROKER_PROPERTIES.items()},
    **{name: replace(_THROTTLE, name=name) for name in (
        "leader.replication.throttled.rate", "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second")},
}


class DynamicConfigError(ValueError):
    """A dynamic change refused; `known` is False when the property is not a dynamic one at all."""

    def __init__(self, message: str, *, known: bool = True) -> None:
        super().__init__(message)
        self.known = known


def validate(changes: Mapping[str, str], *, small_segments: bool = False) -> dict[str, str]:
    """The canonical text of each value; DynamicConfigError with Kafka's wording otherwise."""
    fixed = sorted(k for k in changes if k not in DYNAMIC_BROKER_CONFIGS)
    if fixed:
        raise DynamicConfigError(f"Cannot update these configs dynamically: [{', '.join(fixed)}]", known=False)
    try:
        return {key: with_segment_rule(DYNAMIC_BROKER_CONFIGS[key], small_segments).canonical(value)
                for key, value in changes.items()}
    except InvalidConfig as exc:
        raise DynamicConfigError(str(exc)) from None


TopicDefaultsListener = Callable[[LogConfig, LogConfig], Coroutine[Any, Any, None]]


class DynamicBrokerConfig:
    """This broker's dynamic configs and the cluster-wide ones, read from the store and followed."""

    def __init__(self, store: MetadataStore, config: BrokerConfig) -> None:
        self.store = store
        self.config = config
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self.topic_defaults: LogConfig = config.topic_defaults
        # Called (old, new) when the broker-wide topic defaults change: the topics re-derive their configs.
        self.topic_defaults_listeners: list[TopicDefaultsListener] = []
        # Called when unclean.leader.election.enable in force here changes: the controller elects again.
        self.unclean_election_listeners: list[Callable[[], None]] = []
        self._watches: list[Watch] = []
        self._applying: set[asyncio.Task] = set()
        self._lock = asyncio.Lock()  # one change written at a time per broker: no lost updates
        self._kafka_defaults = default_broker_properties()

    @property
    def own_entity(self) -> str:
        return str(self.config.node_id)

    @property
    def layers(self) -> BrokerLayers:
        return BrokerLayers(self.per_broker, self.cluster_default, self.config.explicit_properties,
                            self._kafka_defaults)

    async def load(self) -> None:
        """Read both nodes (before the logs open, so they start with the defaults in force)."""
        for entity in (DEFAULT_ENTITY, self.own_entity):
            try:
                data, _ = await self.store.get(BrokerConfigZNode.path(entity))
            except NoNode:  # nothing set yet
                continue
            self._take(entity, data)
        self.topic_defaults = self._derive_topic_defaults() or self.topic_defaults

    async def start(self) -> None:
        """Follow both nodes; a change anyone makes is in force here at once."""
        for entity in (DEFAULT_ENTITY, self.own_entity):
            self._watches.append(await self.store.watch_data(BrokerConfigZNode.path(entity), self._follower(entity)))

    def _follower(self, entity: str) -> Callable[[bytes | None, int | None], None]:
        def changed(data: bytes | None, _version: int | None) -> None:
            self._changed(entity, data)

        return changed

    async def stop(self) -> None:
        for watch in self._watches:
            watch.cancel()
        for task in list(self._applying):
            task.cancel()
        await asyncio.gather(*self._applying, return_exceptions=True)

    async def alter(self, entity: str, change: Callable[[dict[str, str]], dict[str, str]], *,
                    validate_only: bool = False) -> None:
        """Replace the dynamic configs of `entity` ("" for the cluster-wide defaults, else this broker's
        id) with `change(current)`, validated; stored, then in force here and on every broker. The
        current values are read from the store and written back only if nobody changed them meanwhile
        (another broker may alter the cluster-wide ones at the same time): no lost update."""
        name = DEFAULT_ENTITY if entity == "" else self.own_entity
        path = BrokerConfigZNode.path(name)

        def validated(current: dict[str, str]) -> dict[str, str] | None:
            # checked also when only validating
            clean = validate(change(current), small_segments=self.config.small_segments_enable)
            return None if validate_only else clean

        async with self._lock:
            written = await ConfigEntityZNode.replace(self.store, path, validated, drop_empty=False)
            if written is None:
                return
            log.info("altered dynamic broker configs", entity=name, configs=written)
            self._changed(name, ConfigEntityZNode.encode(written))

    def _take(self, entity: str, data: bytes | None) -> None:
        try:
            configs = {str(k): str(v) for k, v in ConfigEntityZNode.decode(data).items()} if data else {}
        except (ValueError, TypeError, AttributeError):
            log.error("unreadable dynamic broker configs ignored", path=BrokerConfigZNode.path(entity))
            return
        if entity == DEFAULT_ENTITY:
            self.cluster_default = configs
        else:
            self.per_broker = configs

    def _derive_topic_defaults(self) -> LogConfig | None:
        try:
            return topic_defaults_from(broker_defaults_with(self.layers.merged()))
        except ConfigError as exc:  # written past our checks (another tool): the previous defaults stay
            log.error("dynamic broker configs not applied", error=str(exc))
            return None

    @property
    def unclean_leader_election_enable(self) -> bool:
        """unclean.leader.election.enable in force here (this broker's dynamic value, the cluster-wide one,
        the properties file, false): the controller's default for topics without an override."""
        return stored_only_default(UNCLEAN_ELECTION, self.layers.merged()) == "true"

    def _changed(self, entity: str, data: bytes | None) -> None:
        unclean = self.unclean_leader_election_enable
        self._take(entity, data)
        if self.unclean_leader_election_enable != unclean:
            for wake in self.unclean_election_listeners:
                wake()
        new = self._derive_topic_defaults()
        if new is None or new == self.topic_defaults:
            return
        old, self.topic_defaults = self.topic_defaults, new
        for listener in self.topic_defaults_listeners:
            task = asyncio.get_running_loop().create_task(listener(old, new))
            self._applying.add(task)
            task.add_done_callback(self._applied)

    def _applied(self, task: asyncio.Task) -> None:
        self._applying.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("dynamic topic defaults not applied", error=repr(task.exception()))


class ControllerSettings:
    """The controller's settings (broker/cluster/controller.py's LeaderBalancing): the properties file's,
    but unclean.leader.election.enable as in force now, dynamic changes included."""

    def __init__(self, static: ReplicationConfig, dynamic: DynamicBrokerConfig) -> None:
        self.static = static
        self.dynamic = dynamic

    def __getattr__(self, name: str) -> Any:  # every other setting: the properties file's
        return getattr(self.static, name)

    @property
    def unclean_leader_election_enable(self) -> bool:
        return self.dynamic.unclean_leader_election_enable
