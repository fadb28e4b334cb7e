"""The per-partition part that OffsetCommit and TxnOffsetCommit share: which partitions may be
committed (authorization, existence) and the commits to hand to the group coordinator."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from broker.group import OffsetCommit
from broker.handlers.context import BrokerContext
from broker.security.access import Asker, allowed
from protocol.enums import Operation, ResourceType
from protocol.errors import ErrorCode

R = TypeVar("R")


def gather_commits(broker: BrokerContext, connection: Asker, group_id: str, topics: list,
                   new_result: Callable[[int], R], with_leader_epoch: bool, refused: ErrorCode = ErrorCode.NONE,
                   by_id: bool = False) -> tuple[list[tuple[str, list[R]]], list[tuple[R, OffsetCommit]]]:
    """Results by topic, each with its `error_code` set where a partition is refused, and the
    (result, commit) pairs to store. With an authorizer: READ on the group (else every partition
    fails), then READ on each topic; `refused` (an error the caller found first) fails them all.
    `by_id` (OffsetCommit v10): topics are named by TopicId, and an id no topic has is
    UNKNOWN_TOPIC_ID, checked before the topic's authorization as Kafka does."""
    results: list[tuple[str, list[R]]] = []
    pending: list[tuple[R, OffsetCommit]] = []
    group_ok = allowed(broker, connection, Operation.READ, ResourceType.GROUP, group_id)
    for topic in topics:
        partitions: list[R] = []
        known = broker.topics.by_id(topic.topic_id) if by_id else broker.topics.get(topic.name)
        name = topic.name if not by_id else "" if known is None else known.name
        results.append((name, partitions))
        unknown_id = by_id and known is None
        topic_ok = unknown_id or allowed(broker, connection, Operation.READ, ResourceType.TOPIC, name)
        for p in topic.partitions:
            result = new_result(p.partition_index)
            partitions.append(result)
            if refused != ErrorCode.NONE:
                result.error_code = refused  # type: ignore[attr-defined]
            elif not group_ok or not topic_ok:
                result.error_code = (ErrorCode.GROUP_AUTHORIZATION_FAILED  # type: ignore[attr-defined]
                                     if not group_ok else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif unknown_id:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID  # type: ignore[attr-defined]
            elif known is None or p.partition_index not in known.replicas:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # type: ignore[attr-defined]
            else:
                epoch = p.committed_leader_epoch if with_leader_epoch else -1
                pending.append((result, OffsetCommit(name, p.partition_index, p.committed_offset, epoch,
                                                     p.committed_metadata)))
    return results, pending
