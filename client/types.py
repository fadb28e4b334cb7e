"""Plain data the client hands back: partitions, brokers, topics, and the cluster as Metadata saw it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, TypeVar

from protocol.errors import ErrorCode


class TopicPartition(NamedTuple):
    """A (topic, partition) pair. Being a tuple, a plain ("t", 0) works wherever one is expected."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# A partition as callers name it, TopicPartition or plain tuple: a TypeVar, so that a Mapping keyed by
# either is accepted (Mapping is invariant in its keys).
PartitionKey = TypeVar("PartitionKey", bound=tuple[str, int])


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline_replicas: list[int] = field(default_factory=list)
    error: ErrorCode = ErrorCode.NONE


@dataclass
class TopicInfo:
    name: str
    error: ErrorCode = ErrorCode.NONE
    topic_id: uuid.UUID | None = None
    is_internal: bool = False
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


@dataclass
class ClusterMetadata:
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)


class PartitionResult(Protocol):
    """What every per-partition result has: an error code (NONE on success) and maybe a message."""

    error: ErrorCode
    error_message: str | None
