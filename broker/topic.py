"""One topic as the broker holds it (`Topic`: replicas, configs, partition states), the rules of a
topic's name, and how a topic change the disk could not take is answered."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker.cluster.partition_state import NO_LEADER, PartitionState
from broker.cluster.store import StoreWriteFailed
from broker.config import UNCLEAN_ELECTION
from broker.log.checkpoint import topic_id_to_str
from broker.log.common import StorageError, TopicPartition
from broker.log.config import LogConfig
from broker.topic_placement import TopicError
from protocol.errors import ErrorCode

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
MAX_TOPIC_NAME = 249
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


_Result = TypeVar("_Result")


def storage_failures_answered(fn: Callable[..., Coroutine[Any, Any, _Result]]
                              ) -> Callable[..., Coroutine[Any, Any, _Result]]:
    """A change the disk could not take (the metadata store's file, a partition directory) is
    KAFKA_STORAGE_ERROR for that topic, which clients retry — never a handler failure."""

    @functools.wraps(fn)
    async def answered(*args: Any, **kwargs: Any) -> _Result:
        try:
            return await fn(*args, **kwargs)
        except StorageError as exc:
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, exc.message) from exc
        except StoreWriteFailed as exc:
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"The metadata store: {exc}") from exc

    return answered


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    replicas: dict[int, list[int]]  # partition -> replica broker ids (the first is the preferred leader)
    configs: dict[str, str] = field(default_factory=dict)  # overrides only; defaults come from the broker
    log_config: LogConfig = field(default_factory=LogConfig)
    states: dict[int, PartitionState] = field(default_factory=dict)  # as the store had them last
    # A reassignment under way (KIP-455, broker/cluster/reassignment.py): partition -> the replicas of
    # `replicas` still joining, and those that leave once the target has caught up.
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)

    @property
    def moving(self) -> bool:
        """A reassignment of some partition is under way."""
        return bool(self.adding or self.removing)

    @property
    def unclean_leader_election(self) -> bool | None:
        """The topic's unclean.leader.election.enable override; None: the broker's setting holds."""
        value = self.configs.get(UNCLEAN_ELECTION)
        return None if value is None else value.lower() == "true"

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(self.name, p) for p in sorted(self.replicas)]

    @property
    def replication_factor(self) -> int:
        return len(self.replicas[min(self.replicas)]) if self.replicas else 0

    def leader(self, partition: int) -> int:
        state = self.states.get(partition)
        return NO_LEADER if state is None else state.leader

    def leader_epoch(self, partition: int) -> int:
        state = self.states.get(partition)
        return 0 if state is None else state.leader_epoch

    def isr(self, partition: int) -> list[int]:
        state = self.states.get(partition)
        return list(self.replicas.get(partition, []) if state is None else state.isr)


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_NAME.match(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


def new_topic_id() -> uuid.UUID:
    while True:
        candidate = uuid.uuid4()
        # Kafka reserves the all-zero id ("none") and ids whose base64 starts with '-' (CLI parsing).
        if candidate.int and not topic_id_to_str(candidate).startswith("-"):
            return candidate

def collision_key(name: str) -> str:
    """Kafka refuses a topic whose name differs from an existing one only in '.' versus '_'."""
    return name.replace(".", "_")
