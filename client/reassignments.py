"""Moving partitions and electing leaders (KIP-455, KIP-460), for `ebb reassign` and `ebb
elect-leaders`: the requests go to any broker, which forwards them to the controller; a request
refused as a whole (NOT_CONTROLLER while a controller is elected, ...) is retried like any other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from protocol.enums import ApiKey, ElectionType
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)

from .admin import Admin
from .errors import error_for

Partition = tuple[str, int]
TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Outcome:
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True)
class Moving:
    replicas: list[int]
    adding: list[int]
    removing: list[int]


def _by_topic(partitions: Sequence[Partition]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for topic, partition in partitions:
        found.setdefault(topic, []).append(partition)
    return found


async def elect_leaders(admin: Admin, election: ElectionType, partitions: Sequence[Partition] | None
                        ) -> dict[Partition, Outcome]:
    """Each partition's outcome; None asks for every partition (those needing no election are left out)."""
    named = None if partitions is None else [ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps)
                                             for t, ps in _by_topic(partitions).items()]

    async def attempt() -> dict[Partition, Outcome]:
        conn = await admin.cluster.any_connection()
        answer = await conn.request(ElectLeadersRequest(election_type=election, topic_partitions=named,
                                                        timeout_ms=TIMEOUT_MS),
                                    version=conn.pick_version(ApiKey.ELECT_LEADERS))
        if answer.error_code:
            raise error_for(answer.error_code, "ElectLeaders")
        return {(t.topic, p.partition_id): Outcome(ErrorCode.from_code(p.error_code), p.error_message)
                for t in answer.replica_election_results for p in t.partition_result}

    return await admin.cluster.retry(attempt, what="ElectLeaders")


async def alter_reassignments(admin: Admin, targets: Mapping[Partition, list[int] | None]) -> dict[Partition, Outcome]:
    """Start (a replica list) or cancel (None) each partition's reassignment."""
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    by_topic: dict[str, list] = {}
    for (topic, partition), replicas in targets.items():
        by_topic.setdefault(topic, []).append(Topic.ReassignablePartition(partition_index=partition, replicas=replicas))

    async def attempt() -> dict[Partition, Outcome]:
        conn = await admin.cluster.any_connection()
        answer = await conn.request(AlterPartitionReassignmentsRequest(
            timeout_ms=TIMEOUT_MS, topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()]),
            version=conn.pick_version(ApiKey.ALTER_PARTITION_REASSIGNMENTS))
        if answer.error_code:
            raise error_for(answer.error_code, answer.error_message or "AlterPartitionReassignments")
        return {(t.name, p.partition_index): Outcome(ErrorCode.from_code(p.error_code), p.error_message)
                for t in answer.responses for p in t.partitions}

    return await admin.cluster.retry(attempt, what="AlterPartitionReassignments")


async def list_reassignments(admin: Admin, partitions: Sequence[Partition] | None) -> dict[Partition, Moving]:
    """The reassignments under way (of `partitions`, or all)."""
    Topics = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    named = None if partitions is None else [Topics(name=t, partition_indexes=ps)
                                             for t, ps in _by_topic(partitions).items()]

    async def attempt() -> dict[Partition, Moving]:
        conn = await admin.cluster.any_connection()
        answer = await conn.request(ListPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=named),
                                    version=conn.pick_version(ApiKey.LIST_PARTITION_REASSIGNMENTS))
        if answer.error_code:
            raise error_for(answer.error_code, answer.error_message or "ListPartitionReassignments")
        return {(t.name, p.partition_index): Moving(list(p.replicas), list(p.adding_replicas),
                                                    list(p.removing_replicas))
                for t in answer.topics for p in t.partitions}

    return await admin.cluster.retry(attempt, what="ListPartitionReassignments")
