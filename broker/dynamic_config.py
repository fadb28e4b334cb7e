"""Dynamic broker configs (KIP-226): broker properties changed at runtime, without a restart.

Values live in the metadata store where Kafka kept them in ZooKeeper: `/config/brokers/<id>` for one
broker, `/config/brokers/<default>` for the cluster-wide defaults, each `{"version": 1, "config": {...}}`.
Every broker watches its own node and the default one, so a change made through any broker (or written
by another tool) is in force on all of them at once. Precedence, as in Kafka: this broker's dynamic
value, then the cluster-wide default, then server.properties, then Kafka's default.

What may change, as Kafka 4.3 classifies it: the broker-level defaults of topic configs (`log.*`,
`message.max.bytes`, `min.insync.replicas`, ...; Kafka's DynamicLogConfig), the replication
throttles (in force at once: broker/replica/throttle.py; the log-dirs I/O rate is stored and reported
only, Ebb has one log dir per broker), the log cleaner's I/O rate (from the next round on), the
groups' assignment intervals (`group_intervals`: a KIP-848 consumer group's or a share group's next
heartbeat paces its target by `group.consumer.assignment.interval.ms` or
`group.share.assignment.interval.ms` unless the group sets its own; the streams one is stored and
reported only), and Kafka's
producer-state settings (`producer.id.expiration.ms`, read by the next expiration round, and
`transaction.partition.verification.enable`, by the next transactional Produce), per broker or
cluster-wide. A TLS listener's key material, per broker
under the listener's prefix (`listener.name.<l>.ssl.keystore.location`, ...: broker/security/dynamic_tls.py),
is loaded and checked before it is stored and reaches new connections at once. Any other broker
property is refused by name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Mapping
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
    TransactionConfig,
    broker_defaults_with,
    default_broker_properties,
    topic_defaults_from,
)
from broker.group_configs import GROUP_BROKER_DEFAULTS
from broker.log.cleaner_settings import NO_IO_THROTTLE
from broker.log.config import LogConfig
from broker.property_table import parse_table
from broker.security.dynamic_tls import ListenerTlsReloader, TlsReloadError, check_keys, is_tls_key, redacted
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


_GROUP_INTERVALS = tuple(f"group.{kind}.assignment.interval.ms" for kind in ("consumer", "share", "streams"))
# Broker property -> how a value is checked (the topic config's type and rule, under the broker's name).
CLEANER_IO_RATE = "log.cleaner.io.max.bytes.per.second"
PRODUCER_ID_EXPIRATION = "producer.id.expiration.ms"
PARTITION_VERIFICATION = "transaction.partition.verification.enable"
_THROTTLE = TopicConfigDef("", ConfigType.LONG, None, "", check=at_least(0))
DYNAMIC_BROKER_CONFIGS: dict[str, TopicConfigDef] = {
    **{broker: replace(TOPIC_CONFIGS[topic], name=broker) for broker, topic in TOPIC_DEFAULTS.items()},
    **{broker: replace(TOPIC_CONFIGS[topic], name=broker) for broker, topic in STORED_ONLY_BROKER_PROPERTIES.items()},
    **{name: replace(_THROTTLE, name=name) for name in (
        "leader.replication.throttled.rate", "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second")},
    # Kafka's LogCleaner reconfigurable Ebb takes at runtime: each round reads the rate in force.
    CLEANER_IO_RATE: TopicConfigDef(CLEANER_IO_RATE, ConfigType.DOUBLE, "1.7976931348623157E308", "",
                                    check=lambda v: "Value must be above 0" if not v > 0 else None),
    # Kafka 4.3's GroupCoordinatorConfig.RECONFIGURABLE_CONFIGS Ebb has: cluster-wide (per broker too), an
    # INT of at least 0 and within the group.*.{min,max}.assignment.interval.ms in force (check_group_bounds).
    # The consumer and share ones pace those groups' targets (group_intervals); the streams one is stored
    # and reported only.
    **{name: TopicConfigDef(name, ConfigType.INT, GROUP_BROKER_DEFAULTS[name], "", check=at_least(0))
       for name in _GROUP_INTERVALS},
    # Kafka's DynamicProducerStateManagerConfig (its TransactionLogConfig types and bounds).
    PRODUCER_ID_EXPIRATION: TopicConfigDef(PRODUCER_ID_EXPIRATION, ConfigType.INT, "86400000", "", check=at_least(1)),
    PARTITION_VERIFICATION: TopicConfigDef(PARTITION_VERIFICATION, ConfigType.BOOLEAN, "true", ""),
}


class DynamicConfigError(ValueError):
    """A dynamic change refused; `known` is False when the property is not a dynamic one at all."""

    def __init__(self, message: str, *, known: bool = True) -> None:
        super().__init__(message)
        self.known = known


def validate(changes: Mapping[str, str], *, small_segments: bool = False, tls_listeners: Iterable[str] = (),
             listeners: Iterable[str] = (), per_broker: bool = True) -> dict[str, str]:
    """The canonical text of each value; DynamicConfigError with Kafka's wording otherwise (in Kafka's
    order: properties that are not dynamic, then the listener and TLS keys, then the values)."""
    fixed = sorted(k for k in changes if k not in DYNAMIC_BROKER_CONFIGS and not is_tls_key(k))
    if fixed:
        raise DynamicConfigError(f"Cannot update these configs dynamically: [{', '.join(fixed)}]", known=False)
    try:
        check_keys([k for k in changes if is_tls_key(k)], tls_listeners, per_broker=per_broker, listeners=listeners)
        return {key: value.strip() if is_tls_key(key) else
                with_segment_rule(DYNAMIC_BROKER_CONFIGS[key], small_segments).canonical(value)
                for key, value in changes.items()}
    except (InvalidConfig, TlsReloadError) as exc:
        raise DynamicConfigError(str(exc)) from None


def _tls_part(configs: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in configs.items() if is_tls_key(key)}


def check_group_bounds(configs: Mapping[str, str], bounds: Mapping[str, int]) -> None:
    """Kafka's GroupCoordinatorConfig checks of an assignment interval against its broker's bounds
    (which are static here: server.properties), with its wording."""
    for key in _GROUP_INTERVALS:
        if key in configs:
            low, high = (key.replace(".assignment.", f".{end}.assignment.") for end in ("min", "max"))
            if int(configs[key]) < bounds[low]:
                raise DynamicConfigError(f"{key} must be greater than or equal to {low}")
            if int(configs[key]) > bounds[high]:
                raise DynamicConfigError(f"{key} must be less than or equal to {high}")


TopicDefaultsListener = Callable[[LogConfig, LogConfig], Coroutine[Any, Any, None]]


class DynamicBrokerConfig:
    """This broker's dynamic configs and the cluster-wide ones, read from the store and followed."""

    def __init__(self, store: MetadataStore, config: BrokerConfig) -> None:
        self.store = store
        self.config = config
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self.topic_defaults: LogConfig = config.topic_defaults
        # The transaction.* and producer.id.* settings in force (two of them dynamic): `transactions_changed`
        # hands them to the replica manager and the transaction coordinator.
        self.transactions: TransactionConfig = config.transactions
        # The groups' group.*.assignment.interval.ms in force here (the broker default behind a group's own
        # *.assignment.interval.ms), derived again at each change.
        self.group_intervals: dict[str, int] = {k: config.group_config_properties[k] for k in _GROUP_INTERVALS}
        # Called (old, new) when the broker-wide topic defaults change: the topics re-derive their configs.
        self.topic_defaults_listeners: list[TopicDefaultsListener] = []
        # Called when unclean.leader.election.enable in force here changes: the controller elects again.
        self.unclean_election_listeners: list[Callable[[], None]] = []
        # Called after any change of either node (the replication throttles read their rates again).
        self.change_listeners: list[Callable[[], None]] = []
        self._watches: list[Watch] = []
        self._applying: set[asyncio.Task] = set()
        self._lock = asyncio.Lock()  # one change written at a time per broker: no lost updates
        self._kafka_defaults = default_broker_properties()
        # The TLS listeners' key material in force, and that of this broker's connections to the others.
        to_brokers = config.inter_broker_security
        self.tls = ListenerTlsReloader(config.tls_listeners, config.explicit_properties,
                                       (config.advertised_listener.name, to_brokers)
                                       if to_brokers is not None and to_brokers.ssl_context is not None else None)

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
        self.transactions = self._derive_transactions()
        self.group_intervals = self._derive_group_intervals()
        await self.tls.reload(self.layers.merged())

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

        def validated(current: dict[str, str]) -> dict[str, str]:
            clean = validate(change(current), small_segments=self.config.small_segments_enable,
                             tls_listeners=self.tls.listeners, per_broker=name != DEFAULT_ENTITY,
                             listeners=[listener.name for listener in self.config.listeners])
            check_group_bounds(clean, self.config.group_config_properties)
            return clean

        async with self._lock:
            # Checked first, key material loaded too (off the loop), on what is stored now; the write
            # below applies `change` again should someone have changed the node meanwhile.
            try:
                stored = ConfigEntityZNode.decode((await self.store.get(path))[0])
            except NoNode:
                stored = {}
            checked = validated(dict(stored))
            ready = {} if name == DEFAULT_ENTITY else await self._tls_for(checked)
            if validate_only:
                return
            written = await ConfigEntityZNode.replace(self.store, path, validated, drop_empty=False)
            if written is None or _tls_part(written) == _tls_part(checked):
                self.tls.apply(ready)  # unchanged configs too: key files rewritten in place (as Kafka)
            if written is None:
                return
            log.info("altered dynamic broker configs", entity=name, configs=redacted(written))
            # key material written past the check above (someone changed the node meanwhile) is loaded by
            # the reload that follows, or logged and left out
            self._changed(name, ConfigEntityZNode.encode(written))

    async def _tls_for(self, per_broker: Mapping[str, str]) -> dict:
        """The TLS listeners' key material this broker's dynamic configs `per_broker` would put in force,
        loaded and checked (Kafka refuses what its SslFactory cannot load: INVALID_REQUEST)."""
        try:
            return await self.tls.check({**self.config.explicit_properties, **self.cluster_default, **per_broker})
        except TlsReloadError as exc:
            raise DynamicConfigError(f"Invalid dynamic configuration: {exc}") from None

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

    def _derive_transactions(self) -> TransactionConfig:
        try:
            return parse_table(TransactionConfig, self.layers.merged())
        except ConfigError as exc:  # written past our checks (another tool): the previous settings stay
            log.error("dynamic producer-state configs not applied", error=str(exc))
            return self.transactions

    def _derive_group_intervals(self) -> dict[str, int]:
        merged, found = self.layers.merged(), dict(self.group_intervals)
        for key in _GROUP_INTERVALS:
            value = merged.get(key, GROUP_BROKER_DEFAULTS[key])
            try:
                found[key] = int(value)
            except ValueError:  # written past our checks (another tool): the previous value stays
                log.error("group assignment interval not applied", config=key, value=value)
        return found

    @property
    def unclean_leader_election_enable(self) -> bool:
        """unclean.leader.election.enable in force here (this broker's dynamic value, the cluster-wide one,
        the properties file, false): the controller's default for topics without an override."""
        return stored_only_default(UNCLEAN_ELECTION, self.layers.merged()) == "true"

    def replication_throttle(self, name: str) -> int | None:
        """A replication throttle rate in force here (bytes/s; None: unlimited): this broker's dynamic
        value, the cluster-wide one, then server.properties."""
        value = self.layers.merged().get(name)
        try:
            return None if value is None else int(value)
        except ValueError:  # written past our checks (another tool): unlimited, said once per change
            log.error("replication throttle not applied", config=name, value=value)
            return None

    def cleaner_io_rate(self) -> float:
        """log.cleaner.io.max.bytes.per.second in force here (bytes/s), as the layers give it."""
        value = self.layers.merged().get(CLEANER_IO_RATE)
        try:
            return NO_IO_THROTTLE if value is None else DYNAMIC_BROKER_CONFIGS[CLEANER_IO_RATE].parse(value)
        except InvalidConfig:  # written past our checks (another tool): unlimited, said once per change
            log.error("log cleaner I/O rate not applied", value=value)
            return NO_IO_THROTTLE

    def _changed(self, entity: str, data: bytes | None) -> None:
        unclean = self.unclean_leader_election_enable
        self._take(entity, data)
        self.transactions = self._derive_transactions()
        self.group_intervals = self._derive_group_intervals()
        for changed in self.change_listeners:
            changed()
        if entity == self.own_entity and self.tls.listeners:  # written by another tool: loaded here (no-op if in force)
            self._track(asyncio.get_running_loop().create_task(self.tls.reload(self.layers.merged())))
        if self.unclean_leader_election_enable != unclean:
            for wake in self.unclean_election_listeners:
                wake()
        new = self._derive_topic_defaults()
        if new is None or new == self.topic_defaults:
            return
        old, self.topic_defaults = self.topic_defaults, new
        for listener in self.topic_defaults_listeners:
            self._track(asyncio.get_running_loop().create_task(listener(old, new)))

    def _track(self, task: asyncio.Task) -> None:
        self._applying.add(task)
        task.add_done_callback(self._applied)

    def _applied(self, task: asyncio.Task) -> None:
        self._applying.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("dynamic broker configs not applied", error=repr(task.exception()))


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
