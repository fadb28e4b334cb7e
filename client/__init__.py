"""Ebb's asyncio Kafka client, built on protocol/: admin, a simple producer and an assigned consumer."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from protocol.enums import ConfigResourceType, ConfigSource
    from protocol.errors import ErrorCode

    from .admin import (
        EARLIEST,
        LATEST,
        MAX_TIMESTAMP,
        Admin,
        ConfigEntry,
        ListOffsetsResult,
        NewTopic,
        TopicResult,
    )
    from .cluster import Cluster, parse_bootstrap
    from .connection import BrokerConnection
    from .consumer import Consumer, ConsumerRecord
    from .delete_records import DeletedRecords, DeleteRecordsResult
    from .errors import (
        BootstrapError,
        BrokerConnectionError,
        BrokerUnreachableError,
        ConnectionClosedError,
        KafkaClientError,
        KafkaError,
        MalformedResponseError,
        OffsetOutOfRangeError,
        RequestTimeoutError,
        TopicAlreadyExistsError,
        UnknownTopicOrPartitionError,
        UnsupportedVersionError,
    )
    from .offsets_file import OffsetsFileError, parse_offsets_json
    from .producer import Producer, ProduceResult
    from .types import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo, TopicPartition

# What the package exports, by the module that defines it. A name is imported when it is first asked
# for (PEP 562), so that `client.cli` and `ebb --help` do not load the whole client (asyncio, the
# codec, structlog) to list the commands.
_EXPORTS = {
    "EARLIEST": ".admin",
    "LATEST": ".admin",
    "MAX_TIMESTAMP": ".admin",
    "Admin": ".admin",
    "ConfigEntry": ".admin",
    "ConfigSource": "protocol.enums",
    "ListOffsetsResult": ".admin",
    "NewTopic": ".admin",
    "ConfigResourceType": "protocol.enums",
    "TopicResult": ".admin",
    "Cluster": ".cluster",
    "parse_bootstrap": ".cluster",
    "BrokerConnection": ".connection",
    "Consumer": ".consumer",
    "ConsumerRecord": ".consumer",
    "DeletedRecords": ".delete_records",
    "DeleteRecordsResult": ".delete_records",
    "BootstrapError": ".errors",
    "BrokerConnectionError": ".errors",
    "BrokerUnreachableError": ".errors",
    "ConnectionClosedError": ".errors",
    "KafkaClientError": ".errors",
    "KafkaError": ".errors",
    "MalformedResponseError": ".errors",
    "OffsetOutOfRangeError": ".errors",
    "RequestTimeoutError": ".errors",
    "TopicAlreadyExistsError": ".errors",
    "UnknownTopicOrPartitionError": ".errors",
    "UnsupportedVersionError": ".errors",
    "OffsetsFileError": ".offsets_file",
    "parse_offsets_json": ".offsets_file",
    "Producer": ".producer",
    "ProduceResult": ".producer",
    "BrokerInfo": ".types",
    "ClusterMetadata": ".types",
    "PartitionInfo": ".types",
    "TopicInfo": ".types",
    "TopicPartition": ".types",
    "ErrorCode": "protocol.errors",
}
__all__ = [
    "EARLIEST", "LATEST", "MAX_TIMESTAMP", "Admin", "BootstrapError", "BrokerConnection", "BrokerConnectionError",
    "BrokerInfo", "BrokerUnreachableError", "Cluster", "ClusterMetadata", "ConfigEntry", "ConfigSource",
    "ConnectionClosedError", "Consumer", "ConsumerRecord", "DeletedRecords", "DeleteRecordsResult", "ErrorCode",
    "KafkaClientError", "KafkaError", "ListOffsetsResult", "MalformedResponseError", "NewTopic",
    "OffsetOutOfRangeError", "OffsetsFileError", "PartitionInfo", "ProduceResult", "Producer", "RequestTimeoutError",
    "ConfigResourceType", "TopicAlreadyExistsError", "TopicInfo", "TopicPartition", "TopicResult",
    "UnknownTopicOrPartitionError", "UnsupportedVersionError", "parse_bootstrap", "parse_offsets_json",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # asked once
    return value
