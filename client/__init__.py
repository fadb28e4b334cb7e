"""Ebb's asyncio Kafka client, built on protocol/: admin, a simple producer and an assigned consumer."""

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

__all__ = [
    "EARLIEST", "LATEST", "MAX_TIMESTAMP", "Admin", "BootstrapError", "BrokerConnection", "BrokerConnectionError",
    "BrokerInfo", "BrokerUnreachableError", "Cluster", "ClusterMetadata", "ConfigEntry", "ConfigSource",
    "ConnectionClosedError", "Consumer", "ConsumerRecord", "DeletedRecords", "DeleteRecordsResult", "ErrorCode",
    "KafkaClientError", "KafkaError", "ListOffsetsResult", "MalformedResponseError", "NewTopic",
    "OffsetOutOfRangeError", "OffsetsFileError", "PartitionInfo", "ProduceResult", "Producer", "RequestTimeoutError",
    "ConfigResourceType", "TopicAlreadyExistsError", "TopicInfo", "TopicPartition", "TopicResult",
    "UnknownTopicOrPartitionError", "UnsupportedVersionError", "parse_bootstrap", "parse_offsets_json",
]
