"""Broker configuration: Kafka's property names and defaults, from server.properties and overrides.

`load_config(path, overrides)` reads a Java-properties file (optional) and `key=value` overrides and
returns a `BrokerConfig`. A bad value stops start-up with a ConfigError that names the property.
Broker-level topic defaults (`log.retention.ms`, `log.segment.bytes`, ...) become the default
`LogConfig` of every topic, as in Kafka. How a typed property is declared and checked is
property_table.py's (the replication and transaction tables here use it); the addresses are parsed by
endpoints.py, the authorizer's settings by security/authorizer_config.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

import structlog

from broker import log_output, loopback_tcp
from broker.endpoints import Listener, metrics_listener, parse_listener, zookeeper_connect
from broker.group_configs import (
    ASSIGNOR_CLASS_NAMES,
    ASSIGNORS,
    GROUP_BROKER_DEFAULTS,
    MIGRATION_POLICIES,
    group_broker_properties,
)
from broker.log.cleaner_settings import cleaner_config_problem
from broker.log.config import INT32_MAX, LogConfig, LogManagerConfig
from broker.log.open_files import MIN_OPEN_SEGMENTS
from broker.property_table import (
    ConfigError,
    bool_property,
    int_property,
    parse_table,
    prop,
    property_text,
    table_defaults,
    table_properties,
)
from broker.security import listener_security
from broker.security.authorizer_config import AuthorizerConfig, authorizer_config
from broker.security.inter_broker import inter_broker_security
from broker.security.sasl_config import SaslListener, sasl_listeners
from broker.security.tls import TlsListener, TlsSettingError, tls_listener
from broker.topic_configs import (
    BROKER_PROPERTIES_WITHOUT_DEFAULT,
    SMALL_SEGMENTS_SETTING,
    STORED_ONLY_BROKER_PROPERTIES,
    TOPIC_CONFIGS,
    BrokerLayers,
    InvalidConfig,
    with_segment_rule,
)
from client import java_properties
from client.security import ClientSecurity

log = structlog.get_logger("config")

UNCLEAN_ELECTION = "unclean.leader.election.enable"
REPLICA_SELECTOR_PROPERTY = "replica.selector.class"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True)
class ReplicationConfig:
    """Kafka's replica.* broker properties (how followers fetch, when the leader drops them from the ISR)
    and the controller's leader rebalancing."""

    fetch_wait_max_ms: int = prop("replica.fetch.wait.max.ms", 500, minimum=0)
    fetch_min_bytes: int = prop("replica.fetch.min.bytes", 1, minimum=1)
    fetch_max_bytes: int = prop("replica.fetch.max.bytes", 1024 * 1024, minimum=0)  # per partition
    fetch_response_max_bytes: int = prop("replica.fetch.response.max.bytes", 10 * 1024 * 1024, minimum=0)
    fetch_backoff_ms: int = prop("replica.fetch.backoff.ms", 1000, minimum=0)
    socket_timeout_ms: int = prop("replica.socket.timeout.ms", 30_000, minimum=1)
    lag_time_max_ms: int = prop("replica.lag.time.max.ms", 30_000, minimum=1)
    # Fetch sessions (KIP-227) the broker keeps for consumers and followers (broker/fetch_sessions.py).
    fetch_session_cache_slots: int = prop("max.incremental.fetch.session.cache.slots", 1000, minimum=0)
    # The controller moving leadership back to each partition's preferred (first) replica.
    auto_leader_rebalance_enable: bool = prop("auto.leader.rebalance.enable", True)
    leader_imbalance_check_interval_s: int = prop("leader.imbalance.check.interval.seconds", 300, minimum=1)
    # Kafka's ZooKeeper controller took any integer here (no validator; Kafka 4 removed it).
    leader_imbalance_per_broker_percentage: int = prop("leader.imbalance.per.broker.percentage", 10)
    # How the replication throttles measure their rate (broker/replica/throttle.py): Kafka's windows.
    quota_window_num: int = prop("replication.quota.window.num", 11, minimum=1)
    quota_window_size_seconds: int = prop("replication.quota.window.size.seconds", 1, minimum=1)
    # The default of the topic config of the same name (read apart: a topic may override it).
    unclean_leader_election_enable: bool = False


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    """Kafka's share.coordinator.state.topic.* properties (broker/share/coordinator.py): the layout of
    `__share_group_state`. Replication and min ISR default to 1 here, as offsets.topic.replication.factor
    does (Kafka: 3 and 2)."""

    num_partitions: int = prop("share.coordinator.state.topic.num.partitions", 50, minimum=1)
    replication_factor: int = prop("share.coordinator.state.topic.replication.factor", 1, minimum=1,
                                   maximum=32767)
    min_isr: int = prop("share.coordinator.state.topic.min.isr", 1, minimum=1)
    segment_bytes: int = prop("share.coordinator.state.topic.segment.bytes", 104_857_600, minimum=1)


@dataclass(frozen=True)
class TransactionConfig:
    """Kafka's transaction.* and transactional.id.* broker properties (broker/txn/). The topic's
    replication and min ISR default to 1 here, as offsets.topic.replication.factor does (Kafka: 3 and 2)."""

    state_log_num_partitions: int = prop("transaction.state.log.num.partitions", 50, minimum=1)
    state_log_replication_factor: int = prop("transaction.state.log.replication.factor", 1, minimum=1)
    state_log_min_isr: int = prop("transaction.state.log.min.isr", 1, minimum=1)
    state_log_segment_bytes: int = prop("transaction.state.log.segment.bytes", 104_857_600, minimum=1)
    max_timeout_ms: int = prop("transaction.max.timeout.ms", 900_000, minimum=1)
    transactional_id_expiration_ms: int = prop("transactional.id.expiration.ms", 604_800_000,
                                               minimum=1, maximum=INT32_MAX)
    abort_timed_out_cleanup_interval_ms: int = prop("transaction.abort.timed.out.transaction.cleanup.interval.ms",
                                                    10_000, minimum=1, maximum=INT32_MAX)
    remove_expired_cleanup_interval_ms: int = prop("transaction.remove.expired.transaction.cleanup.interval.ms",
                                                   3_600_000, minimum=1, maximum=INT32_MAX)
    # false: Produce takes a transactional batch without asking the coordinator whether its partition
    # is in the transaction (KIP-890 part 1 off, as in Kafka); it makes hanging transactions possible.
    partition_verification_enable: bool = prop("transaction.partition.verification.enable", True)
    # The transaction.version a new cluster finalizes (Kafka: `kafka-storage format --feature`); in a
    # cluster the first broker's choice is stored in `/feature` and every broker follows it (broker/features.py).
    transaction_version: int = prop("ebb.transaction.version", 2, minimum=0, maximum=2)
    # How long a partition leader keeps an idle producer's state (its sequences, for idempotence), and
    # how often it looks. The first is dynamic, as is the verification above (broker/dynamic_config.py).
    producer_id_expiration_ms: int = prop("producer.id.expiration.ms", 86_400_000, minimum=1, maximum=INT32_MAX)
    producer_id_expiration_check_interval_ms: int = prop("producer.id.expiration.check.interval.ms", 600_000,
                                                         minimum=1, maximum=INT32_MAX)


@dataclass(frozen=True)
class ClientQuotaConfig:
    """Kafka's client quota windows (broker/quotas/): a client's rate is measured over `window_num`
    samples of `window_size_seconds` each; its controller mutations over the `mutation_` pair."""

    window_num: int = prop("quota.window.num", 11, minimum=1)
    window_size_seconds: int = prop("quota.window.size.seconds", 1, minimum=1)
    # controller_mutation_rate's token bucket holds this many windows' worth of mutations (its burst)
    mutation_window_num: int = prop("controller.quota.window.num", 11, minimum=1)
    mutation_window_size_seconds: int = prop("controller.quota.window.size.seconds", 1, minimum=1)


# Broker property -> topic property, for the broker-wide topic defaults (Kafka's names on both sides).
TOPIC_DEFAULTS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.retention.min.timestamp": "retention.min.timestamp",
    "log.retention.committed.groups": "retention.committed.groups",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.erasure.max.delay.ms": "erasure.max.delay.ms",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "message.max.bytes": "max.message.bytes",
    "min.insync.replicas": "min.insync.replicas",
}
# Coarser units Kafka also accepts; the finer one wins when both are set.
_TIME_ALIASES = {
    "log.retention.minutes": ("log.retention.ms", 60_000),
    "log.retention.hours": ("log.retention.ms", 3_600_000),
    "log.roll.hours": ("log.roll.ms", 3_600_000),
    "log.roll.jitter.hours": ("log.roll.jitter.ms", 3_600_000),
}
# Kafka's defaults of the coarser units (the finer ones have none: BROKER_PROPERTIES_WITHOUT_DEFAULT).
_TIME_ALIAS_DEFAULTS = {"log.retention.hours": "168", "log.roll.hours": "168", "log.roll.jitter.hours": "0"}
_LOG_MANAGER_KEYS = frozenset(table_properties(LogManagerConfig))
# Properties Kafka types INT (bounded by Java's int, as declared here) whatever their names say.
INT_PROPERTIES = frozenset(name for name, spec in table_properties(TransactionConfig).items()
                           if spec.metadata["maximum"] == INT32_MAX)
_BROKER_DEFAULTS = {
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    "log.dirs": "data",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "socket.request.max.bytes": "104857600",
    "socket.listen.backlog.size": "50",
    "message.max.bytes": "1048588",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "1",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.commit.timeout.ms": "5000",
    "offset.metadata.max.bytes": "4096",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
    "group.share.max.size": "200",  # members of one share group (KIP-932)
    "group.consumer.max.size": "2147483647",  # members of one KIP-848 consumer group
    "group.consumer.assignors": "uniform,range",  # server-side assignors; the first is the default
    "group.consumer.migration.policy": "bidirectional",  # online migration of groups with members
    # The group.version a new cluster finalizes (Kafka: `kafka-storage format --feature`; 1 serves
    # KIP-848 consumer groups); in a cluster the first broker's choice is stored (broker/features.py).
    "ebb.group.version": "1",
    # What bounds and backs the group configs (broker/group_configs.py).
    **GROUP_BROKER_DEFAULTS,
    "broker.rack": "",
    "log.level": "INFO",
    # Ebb's own: keep DeleteRecords v3 off to act like a broker without KIP-1343 (client tests use it).
    "delete.records.v3.enable": "true",
    "zookeeper.session.timeout.ms": "18000",
    # Replication (followers fetching from leaders), Kafka's names and defaults.
    **table_defaults(ReplicationConfig),
    # Ebb's own: where Prometheus scrapes /metrics (http://host:port); empty keeps metrics off.
    "ebb.metrics.listener": "",
    # SASL listeners: Kafka's cap on a frame before authentication, and Ebb's own deadline for finishing it.
    "sasl.server.max.receive.size": "524288",
    "ebb.sasl.authentication.timeout.ms": "30000",
    "connections.max.reauth.ms": "0",  # KIP-368's session lifetime (broker/security/sasl_config.py)
    # Ebb's own: the congestion control of connections from this host; empty keeps the system's (loopback_tcp.py).
    loopback_tcp.PROPERTY: loopback_tcp.DEFAULT,
    SMALL_SEGMENTS_SETTING: "false",  # Ebb's own, for tests only (broker/topic_configs.py)
    # The transaction coordinator (broker/txn/), Kafka's names.
    **table_defaults(TransactionConfig),
    **table_defaults(ShareCoordinatorConfig),
    **table_defaults(ClientQuotaConfig),
}
# Known broker properties without a default (Kafka's null): ZooKeeper is off unless zookeeper.connect is
# set, and the connection timeout falls back to the session timeout. The replication throttles
# (bytes/s, dynamic in Kafka; broker/replica/throttle.py) are unlimited when unset. Without a replica
# selector the leader serves every consumer.
_THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                   "replica.alter.log.dirs.io.max.bytes.per.second")
_NO_DEFAULT = ("zookeeper.connect", "zookeeper.connection.timeout.ms", *_THROTTLE_RATES, REPLICA_SELECTOR_PROPERTY)


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int
    listeners: tuple[Listener, ...]
    advertised_listener: Listener  # the inter-broker listener's endpoint, which this broker registers
    advertised_listeners: tuple[Listener, ...]  # per listener name: what its clients are told
    listener_protocols: Mapping[str, str]  # listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    sasl_listeners: Mapping[str, SaslListener]  # the SASL listeners' mechanisms and PLAIN users
    tls_listeners: Mapping[str, TlsListener]  # the TLS listeners' SSL contexts
    inter_broker_security: ClientSecurity | None  # how this broker connects to the others; None: PLAINTEXT
    log_dir: Path
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    message_max_bytes: int
    socket_request_max_bytes: int
    socket_listen_backlog_size: int  # connections the kernel queues per listener before the broker accepts them
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offsets_commit_timeout_ms: int
    offset_metadata_max_bytes: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int
    group_share_max_size: int
    group_consumer_max_size: int
    group_consumer_assignors: list[str]
    group_consumer_migration_policy: str
    group_version: int
    rack: str | None
    rack_aware_reads: bool  # replica.selector.class is Kafka's RackAwareReplicaSelector (KIP-392)
    log_level: str
    delete_records_v3_enable: bool
    zookeeper_connect: str | None  # None: the embedded metadata store (one broker)
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int
    replication: ReplicationConfig
    log_manager: LogManagerConfig
    topic_defaults: LogConfig
    properties: Mapping[str, str]
    # What the properties file and the overrides set (DescribeConfigs' STATIC_BROKER_CONFIG source).
    explicit_properties: Mapping[str, str] = field(default_factory=dict)
    metrics_listener: Listener | None = None  # ebb.metrics.listener; None: no /metrics endpoint
    sasl_max_receive_size: int = 524288  # sasl.server.max.receive.size
    transactions: TransactionConfig = field(default_factory=TransactionConfig)
    share_coordinator: ShareCoordinatorConfig = field(default_factory=ShareCoordinatorConfig)
    client_quotas: ClientQuotaConfig = field(default_factory=ClientQuotaConfig)
    authorizer: AuthorizerConfig | None = None  # authorizer.class.name; None: every request is allowed
    sasl_authentication_timeout_ms: int = 30000  # ebb.sasl.authentication.timeout.ms
    small_segments_enable: bool = False  # ebb.testing.small.segments.enable: segment.bytes below 1 MiB
    loopback_congestion_control: str = loopback_tcp.DEFAULT  # ebb.socket.loopback.congestion.control; "": the system's
    # The group.consumer.*, group.share.*, group.streams.* properties: defaults and bounds of group configs.
    group_config_properties: Mapping[str, int] = field(default_factory=lambda: group_broker_properties({}))


def _consumer_assignors(value: str) -> list[str]:
    """group.consumer.assignors: uniform and range, by short or Kafka class name (no custom assignors)."""
    names = [ASSIGNOR_CLASS_NAMES.get(item, item) for item in _split(value)]
    unknown = [n for n in names if n not in ASSIGNORS]
    if not names or unknown:
        raise ConfigError(f"group.consumer.assignors: {', '.join(unknown) or 'empty'}: Ebb serves only "
                          f"{', '.join(ASSIGNORS)}")
    return list(dict.fromkeys(names))


def _rack_aware_selector(value: str | None) -> bool:
    """replica.selector.class: unset (the leader serves every consumer) or Kafka's rack-aware selector
    (broker/replica/read_replica.py); any other class stops start-up, as Ebb cannot run Java selectors,
    and so does an empty one (Kafka cannot load a class named "")."""
    if value is None:
        return False
    name = value.strip()
    if not name:
        raise ConfigError(f"{REPLICA_SELECTOR_PROPERTY} is empty: name {RACK_AWARE_SELECTOR} or leave it unset")
    if name != RACK_AWARE_SELECTOR:
        raise ConfigError(f"{REPLICA_SELECTOR_PROPERTY}: {name!r} is not supported: Ebb serves only "
                          f"{RACK_AWARE_SELECTOR} (or leave it unset)")
    return True


def _migration_policy(value: str) -> str:
    policy = value.strip().lower()
    if policy not in MIGRATION_POLICIES:
        raise ConfigError(f"group.consumer.migration.policy: {value!r} is not one of {', '.join(MIGRATION_POLICIES)}")
    return policy


def parse_properties(text: str) -> dict[str, str]:
    """server.properties in Java's format (the parser the CLI uses too)."""
    try:
        return java_properties.parse_properties(text)
    except java_properties.PropertiesError as exc:
        raise ConfigError(str(exc)) from None


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
    props: dict[str, str] = {}
    if path is not None:
        try:
            props.update(parse_properties(Path(path).read_text(encoding="utf-8")))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r}: expected key=value")
        props[key.strip()] = value.strip()
    return build_config(props)


def build_config(props: Mapping[str, str]) -> BrokerConfig:
    merged = {**_BROKER_DEFAULTS, **props}
    for key in _THROTTLE_RATES:  # bytes/s, Kafka's LONG at least 0
        if key in merged:
            int_property(merged, key, minimum=0)
    listeners = tuple(parse_listener(item, "listeners") for item in _split(merged["listeners"]))
    if not listeners:
        raise ConfigError("listeners: at least one listener is required")
    advertised = tuple(parse_listener(item, "advertised.listeners") for item in _split(merged["advertised.listeners"]))
    for key, listed in (("listeners", listeners), ("advertised.listeners", advertised)):
        names = [item.name for item in listed]
        if len(set(names)) != len(names):
            raise ConfigError(f"{key}: each listener needs its own name, got {', '.join(names)}")
    try:
        protocols = listener_security.check(props, [item.name for item in listeners],
                                            [item.name for item in advertised])
        sasl = sasl_listeners(props, protocols)
        tls = {name: tls_listener(props, name) for name, protocol in protocols.items()
               if protocol in ("SSL", "SASL_SSL")}
    except (listener_security.SecuritySettingError, TlsSettingError) as exc:
        raise ConfigError(str(exc)) from None
    # What clients are told for each listener: its advertised.listeners entry, else the listener itself.
    by_name = {item.name: item for item in advertised}
    advertised_listeners = tuple(by_name.get(item.name, item) for item in listeners)
    for item in advertised_listeners:
        if item.host in ("", "0.0.0.0", "::"):
            raise ConfigError(f"advertised.listeners: clients of listener {item.name} need a concrete host, "
                              f"not a wildcard address")
    inter_broker = listener_security.inter_broker_listener(props, [item.name for item in listeners])
    advertised_listener = next(item for item in advertised_listeners if item.name == inter_broker)
    try:
        # Only brokers of a cluster connect to each other.
        to_brokers = inter_broker_security(props, inter_broker, protocols[inter_broker]) \
            if merged.get("zookeeper.connect", "").strip() else None
    except listener_security.SecuritySettingError as exc:
        raise ConfigError(str(exc)) from None
    log_dirs = _split(merged.get("log.dirs") or merged.get("log.dir", ""))
    if len(log_dirs) != 1:
        raise ConfigError(f"log.dirs: Ebb uses exactly one log directory, got {len(log_dirs)}")
    for key in props:
        if not _known(key):
            log.warning("unknown property ignored", property=key)
        elif key in STORED_ONLY_BROKER_PROPERTIES:
            try:
                TOPIC_CONFIGS[STORED_ONLY_BROKER_PROPERTIES[key]].parse(props[key])
            except InvalidConfig as exc:
                raise ConfigError(f"{key}: {exc}") from None
    session_timeout_ms = int_property(merged, "zookeeper.session.timeout.ms", minimum=1)
    connection_timeout_ms = (int_property(merged, "zookeeper.connection.timeout.ms", minimum=1)
                             if merged.get("zookeeper.connection.timeout.ms", "").strip() else session_timeout_ms)
    return BrokerConfig(
        node_id=int_property(merged, "node.id", minimum=0),
        listeners=listeners,
        advertised_listener=advertised_listener,
        advertised_listeners=advertised_listeners,
        listener_protocols=protocols,
        sasl_listeners=sasl,
        tls_listeners=tls,
        inter_broker_security=to_brokers,
        log_dir=Path(log_dirs[0]),
        num_partitions=int_property(merged, "num.partitions", minimum=1),
        default_replication_factor=int_property(merged, "default.replication.factor", minimum=1),
        auto_create_topics_enable=bool_property(merged, "auto.create.topics.enable"),
        delete_topic_enable=bool_property(merged, "delete.topic.enable"),
        message_max_bytes=int_property(merged, "message.max.bytes", minimum=0),
        socket_request_max_bytes=int_property(merged, "socket.request.max.bytes", minimum=1024),
        socket_listen_backlog_size=int_property(merged, "socket.listen.backlog.size", minimum=1),
        offsets_topic_num_partitions=int_property(merged, "offsets.topic.num.partitions", minimum=1),
        offsets_topic_replication_factor=int_property(merged, "offsets.topic.replication.factor", minimum=1),
        offsets_retention_minutes=int_property(merged, "offsets.retention.minutes", minimum=1),
        offsets_retention_check_interval_ms=int_property(merged, "offsets.retention.check.interval.ms", minimum=1),
        offsets_commit_timeout_ms=int_property(merged, "offsets.commit.timeout.ms", minimum=1),
        offset_metadata_max_bytes=int_property(merged, "offset.metadata.max.bytes", minimum=0),
        group_initial_rebalance_delay_ms=int_property(merged, "group.initial.rebalance.delay.ms", minimum=0),
        group_min_session_timeout_ms=int_property(merged, "group.min.session.timeout.ms", minimum=0),
        group_max_session_timeout_ms=int_property(merged, "group.max.session.timeout.ms", minimum=0),
        group_max_size=int_property(merged, "group.max.size", minimum=1, maximum=INT32_MAX),
        group_share_max_size=int_property(merged, "group.share.max.size", minimum=1, maximum=1000),
        group_consumer_max_size=int_property(merged, "group.consumer.max.size", minimum=1, maximum=INT32_MAX),
        group_consumer_assignors=_consumer_assignors(merged["group.consumer.assignors"]),
        group_consumer_migration_policy=_migration_policy(merged["group.consumer.migration.policy"]),
        group_version=int_property(merged, "ebb.group.version", minimum=0, maximum=1),
        rack=merged["broker.rack"] or None,
        rack_aware_reads=_rack_aware_selector(merged.get(REPLICA_SELECTOR_PROPERTY)),
        log_level=_log_level(merged["log.level"]),
        delete_records_v3_enable=bool_property(merged, "delete.records.v3.enable"),
        zookeeper_connect=zookeeper_connect(merged.get("zookeeper.connect", "")),
        zookeeper_session_timeout_ms=session_timeout_ms,
        zookeeper_connection_timeout_ms=connection_timeout_ms,
        transactions=parse_table(TransactionConfig, merged),
        share_coordinator=parse_table(ShareCoordinatorConfig, merged),
        client_quotas=parse_table(ClientQuotaConfig, merged),
        replication=parse_table(ReplicationConfig, merged, unclean_leader_election_enable=bool_property(
            {UNCLEAN_ELECTION: "false", **merged}, UNCLEAN_ELECTION)),
        log_manager=_log_manager(merged),
        topic_defaults=topic_defaults_from(merged),
        properties=dict(merged),
        explicit_properties=dict(props),
        metrics_listener=metrics_listener(merged["ebb.metrics.listener"]),
        sasl_max_receive_size=int_property(merged, "sasl.server.max.receive.size", minimum=1),
        authorizer=authorizer_config(merged),
        sasl_authentication_timeout_ms=int_property(merged, "ebb.sasl.authentication.timeout.ms", minimum=1),
        small_segments_enable=bool_property(merged, SMALL_SEGMENTS_SETTING),
        loopback_congestion_control=loopback_tcp.congestion_control(merged[loopback_tcp.PROPERTY]),
        group_config_properties=_group_config_properties(merged),
    )


def _group_config_properties(merged: Mapping[str, str]) -> dict[str, int]:
    try:
        return group_broker_properties(merged)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _known(key: str) -> bool:
    return key in _BROKER_DEFAULTS or key in TOPIC_DEFAULTS or key in _TIME_ALIASES or key in _LOG_MANAGER_KEYS \
        or key in STORED_ONLY_BROKER_PROPERTIES or key in _NO_DEFAULT or key in ("log.dir", "broker.id") \
        or listener_security.is_security_property(key)


def _log_level(value: str) -> str:
    try:
        return log_output.kafka_level(value)
    except ValueError:
        raise ConfigError(f"log.level: {value!r} is not one of {', '.join(log_output.KAFKA_LEVELS)}") from None


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]



def _topic_props(props: Mapping[str, str]) -> dict[str, str]:
    topic: dict[str, str] = {}
    for alias, (target, factor) in _TIME_ALIASES.items():
        if alias in props and target not in props:
            topic[TOPIC_DEFAULTS[target]] = str(int_property(props, alias) * factor)
    for broker_key, topic_key in TOPIC_DEFAULTS.items():
        if broker_key in props:
            topic[topic_key] = props[broker_key]
    return topic


def topic_defaults_from(props: Mapping[str, str]) -> LogConfig:
    """The broker-wide topic defaults that broker properties (log.retention.ms, ...) set; ConfigError
    naming the property whose value is bad."""
    topic_props = _topic_props(props)
    small_segments = str(props.get(SMALL_SEGMENTS_SETTING, "false")).strip().lower() == "true"
    for topic_key, value in topic_props.items():
        try:
            with_segment_rule(TOPIC_CONFIGS[topic_key], small_segments).parse(value)
        except InvalidConfig as exc:
            setters = [b for b, t in TOPIC_DEFAULTS.items() if t == topic_key and b in props]
            setters += [a for a, (b, _) in _TIME_ALIASES.items() if TOPIC_DEFAULTS[b] == topic_key and a in props]
            raise ConfigError(f"{setters[0] if setters else topic_key}: {exc}") from None
    try:
        return LogConfig.from_properties(topic_props)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"topic default: {exc}") from None


def _log_manager(props: Mapping[str, str]) -> LogManagerConfig:
    chosen = {k: v for k, v in props.items() if k in _LOG_MANAGER_KEYS}
    try:
        config = LogManagerConfig.from_properties(chosen)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"log manager: {exc}") from None
    if config.min_free_bytes < 0 or not 0 <= config.min_free_percent < 100:
        raise ConfigError("log.dir.min.free.bytes must be >= 0 and log.dir.min.free.percent in [0, 100)")
    if config.free_space_check_interval_ms < 1:
        raise ConfigError("log.dir.free.space.check.interval.ms must be at least 1")
    if config.failure_probe_interval_ms < 1:
        raise ConfigError("log.dir.failure.probe.interval.ms must be at least 1")
    if config.open_segments_max < MIN_OPEN_SEGMENTS:
        raise ConfigError(f"ebb.log.open.segments.max: {config.open_segments_max} is below the minimum "
                          f"{MIN_OPEN_SEGMENTS}")
    problem = cleaner_config_problem(config)
    if problem is not None:
        raise ConfigError(problem)
    return config


def known_broker_properties(config: BrokerConfig, topic_defaults: LogConfig | None = None,
                            in_force: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """Every broker property Ebb knows, with the value in force: what was set (`in_force`: the
    properties file and the dynamic configs; by default the file alone), else the default (None where
    Kafka has no default, e.g. log.retention.minutes). DescribeConfigs lists these."""
    values: dict[str, str | None] = dict(_BROKER_DEFAULTS)
    if topic_defaults is None:
        topic_defaults = config.topic_defaults  # the broker-wide topic defaults in force
    by_property = {f.metadata["property"]: getattr(topic_defaults, f.name) for f in fields(LogConfig)}
    for broker_key, topic_key in TOPIC_DEFAULTS.items():
        default = by_property[topic_key]
        values.setdefault(broker_key, ",".join(default) if isinstance(default, tuple)
                          else None if default is None else str(default))
    # what Kafka lists as null unless set (the topic default comes from the coarser unit or Kafka's default)
    values.update({"log.retention.minutes": None, **_TIME_ALIAS_DEFAULTS})
    values.update(dict.fromkeys(BROKER_PROPERTIES_WITHOUT_DEFAULT))
    values.update(dict.fromkeys(_NO_DEFAULT))
    for f in fields(LogManagerConfig):
        value = getattr(config.log_manager, f.name)
        values[f.metadata["property"]] = property_text(value)
    for broker_key, topic_key in STORED_ONLY_BROKER_PROPERTIES.items():
        values[broker_key] = TOPIC_CONFIGS[topic_key].default
    values.update(config.explicit_properties if in_force is None else in_force)
    return values


def default_broker_properties() -> dict[str, str | None]:
    """Kafka's default of each broker property (DescribeConfigs' DEFAULT_CONFIG synonyms)."""
    values: dict[str, str | None] = dict(_BROKER_DEFAULTS)
    defaults = LogConfig()
    by_property = {f.metadata["property"]: getattr(defaults, f.name) for f in fields(LogConfig)}
    for broker_key, topic_key in TOPIC_DEFAULTS.items():
        default = by_property[topic_key]
        values[broker_key] = ",".join(default) if isinstance(default, tuple) else \
            None if default is None else str(default)
    for broker_key, topic_key in STORED_ONLY_BROKER_PROPERTIES.items():
        values[broker_key] = TOPIC_CONFIGS[topic_key].default
    values.update(_TIME_ALIAS_DEFAULTS)
    values.update(table_defaults(LogManagerConfig))
    # Kafka has no default for these: another property supplies it (log.dir for log.dirs, ...).
    values.update(dict.fromkeys([*BROKER_PROPERTIES_WITHOUT_DEFAULT, *_NO_DEFAULT, "log.dirs"]))
    return values


def static_layers(properties: Mapping[str, str]) -> BrokerLayers:
    """The broker properties of a broker without dynamic configs."""
    return BrokerLayers({}, {}, properties, default_broker_properties())


def broker_defaults_with(props: Mapping[str, str]) -> dict[str, str]:
    """Kafka's defaults of the core broker properties under `props` (what build_config starts from)."""
    return {**_BROKER_DEFAULTS, **props}
