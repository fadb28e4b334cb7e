"""What a reader or a writer needs, parsed once from the options where Spark creates it.

These are small frozen dataclasses: Spark pickles readers and writers to its Python workers, so a
config must carry plain values only (no sockets, no event loops).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .options import (
    EARLIEST,
    LATEST,
    EbbSourceError,
    OffsetSpec,
    TopicSelection,
    bootstrap_servers,
    flag,
    offset_spec,
    positive_int,
    topic_selection,
)

# kafka.* options the client understands, mapped to its keyword arguments. Others are ignored.
_CLIENT_OPTIONS = {
    "kafka.request.timeout.ms": "request_timeout_ms",
    "kafka.retry.backoff.ms": "retry_backoff_ms",
    "kafka.retry.backoff.max.ms": "retry_backoff_max_ms",
    "kafka.socket.connection.setup.timeout.ms": "connect_timeout_ms",
}
_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


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
    client: dict = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, streaming: bool) -> ReadConfig:
        bootstrap = bootstrap_servers(options)
        selection = topic_selection(options)
        starting = offset_spec(options, "startingOffsets", "latest" if streaming else "earliest")
        ending = None
        if streaming:
            if options.get("endingOffsets") is not None:
                raise EbbSourceError("option 'endingOffsets' is for batch queries; a stream has no end")
        else:
            ending = offset_spec(options, "endingOffsets", "latest")
            if _names(starting, "latest", LATEST):
                raise EbbSourceError("option 'startingOffsets' cannot be latest (-1) in a batch query")
            if _names(ending, "earliest", EARLIEST):
                raise EbbSourceError("option 'endingOffsets' cannot be earliest (-2) in a batch query")
            if options.get("maxOffsetsPerTrigger") is not None:
                raise EbbSourceError("option 'maxOffsetsPerTrigger' is for streaming queries")
        return cls(
            bootstrap=bootstrap,
            selection=selection,
            starting=starting,
            ending=ending,
            fail_on_data_loss=flag(options, "failOnDataLoss", True),
            include_headers=flag(options, "includeHeaders", False),
            min_partitions=positive_int(options, "minPartitions"),
            max_offsets_per_trigger=positive_int(options, "maxOffsetsPerTrigger"),
            client=_client_options(options),
        )


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
    client: dict = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, str], schema) -> WriteConfig:
        from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, ShortType, StringType, StructType

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
        return cls(
            bootstrap=bootstrap,
            topic=topic,
            value_index=value_index,
            key_index=column("key", BinaryType, StringType),
            topic_index=topic_index,
            partition_index=column("partition", IntegerType, LongType, ShortType),
            headers_index=headers_index,
            acks=_ACKS[acks],
            client=_client_options(options),
        )
