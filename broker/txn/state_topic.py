"""`__transaction_state` as a topic: created on first use with the coordinator's settings (compacted,
its own segment size and min.insync.replicas), and which of its partitions holds a transactional id
(Kafka's partitionFor, shared with the group coordinator)."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

import structlog

from broker.aio import SharedRun
from broker.config import TransactionConfig
from broker.group.offsets_store import partition_for
from broker.topic import Topic
from broker.topics import TopicError
from broker.txn.state_log import TRANSACTION_STATE_TOPIC, TxnError
from protocol.errors import ErrorCode

log = structlog.get_logger("transactions")


class TxnTopics(Protocol):
    """What the transaction coordinator uses of the topics (topics.py's TopicManager): a topic by
    name, and creating `__transaction_state`."""

    def get(self, name: str) -> Topic | None: ...
    def create(self, name: str, num_partitions: int, replication_factor: int,
               configs: Mapping[str, str | None] | None = None) -> Awaitable[Any]: ...


class TxnStateTopic:
    def __init__(self, topics: TxnTopics, settings: TransactionConfig) -> None:
        self.topics = topics
        self.settings = settings
        self._creating = SharedRun(self._create_topic)

    async def ensure(self) -> None:
        """One creation at a time, shared by every caller meanwhile; COORDINATOR_NOT_AVAILABLE if it fails."""
        if self.topics.get(TRANSACTION_STATE_TOPIC) is not None:
            return
        await self._creating.run()

    async def _create_topic(self) -> None:
        s = self.settings
        configs = {"cleanup.policy": "compact", "segment.bytes": str(s.state_log_segment_bytes),
                   "min.insync.replicas": str(s.state_log_min_isr), "compression.type": "uncompressed",
                   "unclean.leader.election.enable": "false"}
        try:
            await self.topics.create(TRANSACTION_STATE_TOPIC, s.state_log_num_partitions,
                                     s.state_log_replication_factor, configs)
        except TopicError as exc:
            if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS or self.topics.get(TRANSACTION_STATE_TOPIC):
                return
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                           f"cannot create {TRANSACTION_STATE_TOPIC}: {exc.message}") from None
        log.info("created the transaction state topic", partitions=s.state_log_num_partitions)

    def partition_of(self, transactional_id: str) -> int:
        """The `__transaction_state` partition of the id (its leader is the id's coordinator)."""
        topic = self.topics.get(TRANSACTION_STATE_TOPIC)
        count = len(topic.replicas) if topic is not None else self.settings.state_log_num_partitions
        return partition_for(transactional_id, count)
