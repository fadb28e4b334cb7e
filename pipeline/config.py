"""What a reader or a writer needs, parsed once from the options where Spark creates it.

These are small frozen dataclasses: Spark pickles readers and writers to its Python workers, so a
config must carry plain values only (no sockets, no event loops).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from client.security_settings import KEYS as SECURITY_KEYS
from client.security_settings import SecuritySettingError, SecuritySettings, security_settings
from protocol.enums import IsolationLevel

from .options import (
    EARLIEST,
    LATEST,
    EbbSourceError,
    OffsetSpec,
    TopicSelection,
    bootstrap_servers,
    check_known,
    duration_s,
    flag,
    position_spec,
    positive_int,
    topic_selection,
)

# kafka.* options the client understands, mapped to its keyword arguments. Others are refused.
_CLIENT_OPTIONS = {
    "kafka.request.timeout.ms": "request_timeout_ms",
    "kafka.retry.backoff.ms": "retry_backoff_ms",
    "kafka.retry.backoff.max.ms": "retry_backoff_max_ms",
    "kafka.socket.connection.setup.timeout.ms": "connect_timeout_ms",
}
_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
# Kafka's values of isolation.level (case-sensitive, as Kafka's consumer checks them)
_ISOLATION = {"read_uncommitted": IsolationLevel.READ_UNCOMMITTED, "read_committed": IsolationLevel.READ_COMMITTED}
_COMMON = {"kafka.bootstrap.servers", "bootstrap.servers", "kafka.client.id", *_CLIENT_OPTIONS,
           *(f"kafka.{key}" for key in SECURITY_KEYS)}
_READ_OPTIONS = frozenset(name.lower() for name in {
    *_COMMON, "subscribe", "subscribePattern", "assign", "startingOffsets", "startingOffsetsByTimestamp",
    "startingTimestamp", "startingOffsetsByTimestampStrategy", "endingOffsets", "endingOffsetsByTimestamp",
    "endingTimestamp", "failOnDataLoss", "includeHeaders", "minPartitions", "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger", "maxTriggerDelay", "kafka.isolation.level",
    "kafka.group.id", "deleteCommitted", "deleteCommitted.topics", "deleteCommitted.leaderOnly"})
# queryName and checkpointLocation: Spark hands a stream's own settings to its sink as well
_WRITE_OPTIONS = frozenset(name.lower() for name in {*_COMMON, "topic", "kafka.acks", "kafka.compression.type",
                                                     "queryName", "checkpointLocation"})
_COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
_STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "kafka.group.id",
                "deleteCommitted", "deleteCommitted.topics", "deleteCommitted.leaderOnly")


def security_options(options: Mapping[str, str]) -> SecuritySettings:
    """kafka.security.protocol, kafka.sasl.*, kafka.ssl.* as the Kafka connector passes them to its client."""
    try:
        return security_settings({key.lower(): value for key, value in options.items()}, prefix="kafka.")
    except SecuritySettingError as exc:
        raise EbbSourceError(f"option {exc}") from None


def isolation_level(options: Mapping[str, str]) -> IsolationLevel:
    raw = options.get("kafka.isolation.level", "read_uncommitted").strip()
    if raw not in _ISOLATION:
        raise EbbSourceError(f"option 'kafka.isolation.level' must be read_uncommitted or read_committed, "
                             f"not {raw!r}")
    return _ISOLATION[raw]


def _client_options(options: Mapping[str, str]) -> dict[str, int | str]:
    out: dict[str, int | str] = {"client_id": options.get("kafka.client.id", "ebb-spark")}
    for name, keyword in _CLIENT_OPTIONS.items():
        value = positive_int(options, name)
        if value is not None:
            out[keyword] = value
    return out


@dataclass(frozen=True)
class ReadConfig:
    bootstrap: str
    selection: TopicSelection
    starting: OffsetSpec
    ending: OffsetSpec | None  # batch only
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None  # wait for this many, but no longer than max_trigger_delay_s
    max_trigger_delay_s: float = 900.0
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED  # READ_COMMITTED: ends at the LSO
    group_id: str | None = None  # stream only: the consumer group its finished batches are committed to
    delete_committed: DeleteCommitted | None = None  # stream only
    client: dict = field(default_factory=dict)
    security: SecuritySettings = SecuritySettings()

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, streaming: bool) -> ReadConfig:
        check_known(options, _READ_OPTIONS, "source")
        bootstrap = bootstrap_servers(options)
        selection = topic_selection(options)
        starting = position_spec(options, "starting", "latest" if streaming else "earliest")
        ending = None
        if streaming:
            for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
                if options.get(name) is not None:
                    raise EbbSourceError(f"option '{name}' is for batch queries; a stream has no end")
        else:
            ending = position_spec(options, "ending", "latest")
            if _names(starting, "latest", LATEST):
                raise EbbSourceError("option 'startingOffsets' cannot be latest (-1) in a batch query")
            if _names(ending, "earliest", EARLIEST):
                raise EbbSourceError("option 'endingOffsets' cannot be earliest (-2) in a batch query")
            for name in _STREAM_ONLY:
                if options.get(name) is not None:
                    raise EbbSourceError(f"option '{name}' is for streaming queries")
        low, high = positive_int(options, "minOffsetsPerTrigger"), positive_int(options, "maxOffsetsPerTrigger")
        if low is not None and high is not None and low > high:
            raise EbbSourceError(f"option 'minOffsetsPerTrigger' ({low}) is above 'maxOffsetsPerTrigger' ({high})")
        if options.get("maxTriggerDelay") is not None and low is None:
            raise EbbSourceError("option 'maxTriggerDelay' needs minOffsetsPerTrigger")
        group_id = options.get("kafka.group.id")
        if group_id is not None and not group_id.strip():
            raise EbbSourceError("option 'kafka.group.id' is empty")
        return cls(
            bootstrap=bootstrap,
            selection=selection,
            starting=starting,
            ending=ending,
            fail_on_data_loss=flag(options, "failOnDataLoss", True),
            include_headers=flag(options, "includeHeaders", False),
            min_partitions=positive_int(options, "minPartitions"),
            max_offsets_per_trigger=high,
            min_offsets_per_trigger=low,
            max_trigger_delay_s=duration_s(options, "maxTriggerDelay", "15m"),
            isolation_level=isolation_level(options),
            group_id=group_id,
            delete_committed=DeleteCommitted.from_options(options, group_id) if streaming else None,
            client=_client_options(options),
            security=security_options(options),
        )


@dataclass(frozen=True)
class DeleteCommitted:
    """deleteCommitted=true: DeleteRecords below what the stream committed, on topics matching `topics`."""

    topics: str  # a regular expression matched against whole topic names
    leader_only: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, str], group_id: str | None) -> DeleteCommitted | None:
        enabled = flag(options, "deleteCommitted", False)
        pattern = options.get("deleteCommitted.topics")
        leader_only = flag(options, "deleteCommitted.leaderOnly", False)
        if not enabled:
            for name in ("deleteCommitted.topics", "deleteCommitted.leaderOnly"):
                if options.get(name) is not None:
                    raise EbbSourceError(f"option '{name}' needs deleteCommitted=true")
            return None
        if group_id is None:
            raise EbbSourceError("option 'deleteCommitted' needs kafka.group.id: it deletes what that group committed")
        if not pattern or not pattern.strip():
            raise EbbSourceError("option 'deleteCommitted' needs 'deleteCommitted.topics', a regular expression of "
                                 "the topics it may trim (for example '.*-intermediate')")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise EbbSourceError(f"option 'deleteCommitted.topics' is not a valid regular expression: {exc}") from None
        return cls(pattern, leader_only)


def _names(spec: OffsetSpec, kind: str, sentinel: int) -> bool:
    if spec.kind == "specific":
        return any(o == sentinel for parts in spec.offsets.values() for o in parts.values())
    return spec.kind == kind


@dataclass(frozen=True)
class WriteConfig:
    """Where each column of the written rows is, and how to produce them."""

    bootstrap: str
    topic: str | None  # the 'topic' option; it wins over a topic column
    value_index: int
    key_index: int | None
    topic_index: int | None
    partition_index: int | None
    headers_index: int | None
    acks: int = -1
    compression: str = "none"
    client: dict = field(default_factory=dict)
    security: SecuritySettings = SecuritySettings()

    @classmethod
    def from_options(cls, options: Mapping[str, str], schema) -> WriteConfig:
        from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, ShortType, StringType, StructType

        check_known(options, _WRITE_OPTIONS, "sink")
        bootstrap = bootstrap_servers(options)
        columns = {f.name.lower(): (i, f.dataType) for i, f in enumerate(schema.fields)}

        def column(name: str, *types) -> int | None:
            if name not in columns:
                return None
            index, data_type = columns[name]
            if not isinstance(data_type, types):
                allowed = " or ".join(t.typeName() for t in types)
                raise EbbSourceError(f"column '{name}' must be {allowed}, not {data_type.simpleString()}")
            return index

        value_index = column("value", BinaryType, StringType)
        if value_index is None:
            raise EbbSourceError(f"the rows to write need a 'value' column (binary or string); "
                                 f"they have {', '.join(schema.fieldNames()) or 'no columns'}")
        topic = options.get("topic")
        topic_index = column("topic", StringType)
        if topic is not None and not topic.strip():
            raise EbbSourceError("option 'topic' is empty")
        if topic is None and topic_index is None:
            raise EbbSourceError("name the topic to write to: the option 'topic' or a string column 'topic'")
        headers_index = column("headers", ArrayType)
        if headers_index is not None:
            element = columns["headers"][1].elementType
            if not (isinstance(element, StructType) and [f.name for f in element.fields] == ["key", "value"]):
                raise EbbSourceError("column 'headers' must be array<struct<key: string, value: binary>>")
        acks = options.get("kafka.acks", "all").strip().lower()
        if acks not in _ACKS:
            raise EbbSourceError(f"option 'kafka.acks' must be all, -1, 1 or 0, not {acks!r}")
        compression = options.get("kafka.compression.type", "none").strip().lower()
        if compression not in _COMPRESSION:
            raise EbbSourceError(f"option 'kafka.compression.type' must be one of {', '.join(_COMPRESSION)}, "
                                 f"not {compression!r}")
        return cls(
            bootstrap=bootstrap,
            topic=topic,
            value_index=value_index,
            key_index=column("key", BinaryType, StringType),
            topic_index=topic_index,
            partition_index=column("partition", IntegerType, LongType, ShortType),
            headers_index=headers_index,
            acks=_ACKS[acks],
            compression=compression,
            client=_client_options(options),
            security=security_options(options),
        )


def cluster_options(config: ReadConfig | WriteConfig) -> dict:
    """Keyword arguments for the project's Admin and Consumer. The TLS context is made here, in the
    process that connects: an SSLContext does not travel to Spark's workers."""
    return {**config.client, "security": config.security.client_security()}
