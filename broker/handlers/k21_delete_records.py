"""DeleteRecords (key 21), versions 0-3 (v3 is Ebb's KIP-1343 extension: LeaderOnly, LeaderLogStartOffset).

Moves each partition's log start offset up to the requested offset; the records below it are no
longer readable at once, and their segments are deleted once wholly below it. Per partition, in
Kafka's order (KafkaApis.handleDeleteRecordsRequest, ReplicaManager.deleteRecordsOnLocalLog,
Partition.deleteRecordsOnLeader, UnifiedLog.maybeIncrementLogStartOffset):
- unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
- an internal topic (`__consumer_offsets`, ...): INVALID_TOPIC_EXCEPTION;
- not the leader: NOT_LEADER_OR_FOLLOWER;
- `cleanup.policy` without `delete` (compact only): POLICY_VIOLATION;
- offset -1 means the high watermark; any other negative offset, or one above the high watermark:
  OFFSET_OUT_OF_RANGE;
- an offset at or below the current log start offset: a successful no-op;
- an I/O failure: KAFKA_STORAGE_ERROR.
A partition listed twice counts once, with its last offset (Kafka keys the request by partition).

Completion: a successful partition is done when its low watermark (the smallest log start offset
over the alive replicas; the leader's own on one broker) reaches the requested offset. Until then the
request waits in the delete-records purgatory, woken when a low watermark moves, for up to
TimeoutMs; partitions still short then get REQUEST_TIMED_OUT with the low watermark they had when
the request arrived. On one broker every partition completes at once. All partitions of a request move
their log start offsets first and then wait for the disk, so one checkpoint write covers them.

TimeoutMs <= 0 parks nothing: partitions whose low watermark is short are REQUEST_TIMED_OUT at once
with the low watermark known then (KAFKA-20560; Kafka answers the same, after a trip through its
purgatory).

v3 (KIP-1343) LeaderOnly=true answers as soon as the leader's new log start offset is durable (on
disk in log-start-offset-checkpoint; forced if `log.start.offset.checkpoint.sync` is off), without
waiting for followers and without entering the purgatory. Every v3 partition result carries
LeaderLogStartOffset (between LowWatermark and ErrorCode on the wire): the leader's log start offset
when it answered, -1 on errors. With `delete.records.v3.enable=false` ApiVersions stops at v2 and a v3
request is answered UNSUPPORTED_VERSION for every partition. LowWatermark is -1 on errors.

With an authorizer, each topic needs DELETE on it (KIP-107 §3); without it the partition is
TOPIC_AUTHORIZATION_FAILED, checked before the topic's existence, as Kafka does.

Errors: NONE, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION,
NOT_LEADER_OR_FOLLOWER, POLICY_VIOLATION, OFFSET_OUT_OF_RANGE, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR,
UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from broker.handlers import BrokerContext, handles
from broker.log import LogError
from broker.replica import PartitionError
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse

log = structlog.get_logger("delete_records")

API_KEY = ApiKey.DELETE_RECORDS
_TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
_PartitionResult = _TopicResult.DeleteRecordsPartitionResult


@handles(API_KEY, "0-3")
async def delete_records(broker: BrokerContext, request: Request[DeleteRecordsRequest]) -> DeleteRecordsResponse:
    body = request.body
    version = request.api_version
    leader_only = version >= 3 and body.leader_only
    started = time.perf_counter()
    def may_delete(name: str) -> bool:  # KIP-107 §3: DELETE on the topic
        return allowed(broker, request, Operation.DELETE, ResourceType.TOPIC, name)

    response = await _delete_records(broker, body, version, leader_only, may_delete)
    broker.replicas.counters.delete_latency["leader_only" if leader_only else "all_replicas"].observe(
        time.perf_counter() - started)
    return response


async def _delete_records(broker: BrokerContext, body, version: int, leader_only: bool,
                          may_delete: Callable[[str], bool]) -> DeleteRecordsResponse:
    refused = version >= 3 and not broker.config.delete_records_v3_enable
    asked: dict[tuple[str, int], int] = {}
    for topic in body.topics:
        for p in topic.partitions:
            asked.pop((topic.name, p.partition_index), None)
            asked[(topic.name, p.partition_index)] = p.offset
    by_topic: dict[str, list] = {}
    pending = []  # (partition, result, offset the low watermark must reach)

    def refuse(result, name: str, index: int, offset: int, exc: PartitionError | LogError) -> None:
        result.error_code = exc.error_code
        log.info("delete records refused", partition=f"{name}-{index}", offset=offset,
                 error=ErrorCode(exc.error_code).name, reason=exc.message)

    started = []  # (partition, result, required, moved, name, index, offset)
    for (name, index), offset in asked.items():
        result = _PartitionResult(partition_index=index, low_watermark=-1, error_code=ErrorCode.NONE)
        if version >= 3:
            result.leader_log_start_offset = -1
        by_topic.setdefault(name, []).append(result)
        topic = broker.topics.get(name)
        if refused:
            result.error_code = ErrorCode.UNSUPPORTED_VERSION
        elif not may_delete(name):  # before existence, so that no one learns which topics exist
            result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None or index not in topic.replicas:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif topic.internal:
            result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
        else:
            try:
                partition = broker.replicas.partition(name, index)
                required, moved = partition.start_delete_records_on_leader(offset)
            except (PartitionError, LogError) as exc:
                refuse(result, name, index, offset, exc)
                continue
            started.append((partition, result, required, moved, name, index, offset))
    # Every start offset has moved in memory; the first wait below writes the checkpoint with all of
    # them (group commit), so the others find theirs durable already.
    for partition, result, required, moved, name, index, offset in started:
        try:
            await partition.finish_delete_records(moved)
            if leader_only and partition.log.durable_log_start_offset < partition.log_start_offset:
                await broker.logs.start_offsets.write()
        except (PartitionError, LogError) as exc:
            refuse(result, name, index, offset, exc)
            continue
        result.low_watermark = partition.low_watermark()
        if version >= 3:
            result.leader_log_start_offset = partition.log_start_offset
        if not leader_only and result.low_watermark < required:
            pending.append((partition, result, required))
    if pending:
        await _await_low_watermarks(broker, pending, body.timeout_ms, version)
    return DeleteRecordsResponse(throttle_time_ms=0, topics=[
        _TopicResult(name=name, partitions=results) for name, results in by_topic.items()])


async def _await_low_watermarks(broker: BrokerContext, pending, timeout_ms: int, version: int) -> None:
    """Kafka's DelayedDeleteRecords: done when every low watermark reached its offset."""

    if timeout_ms > 0:  # nothing to wait for otherwise: the answer is what is known now
        await broker.replicas.deletions.wait([p.topic_partition for p, _, _ in pending], _reached(pending),
                                             timeout_ms)
    for partition, result, required in pending:
        low = partition.low_watermark()
        if not partition.is_leader:
            result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # the new leader has the start offset
            result.low_watermark = -1
        elif low >= required:
            result.low_watermark = low
            if version >= 3:
                result.leader_log_start_offset = partition.log_start_offset
            continue
        else:
            # Kafka keeps the low watermark seen on arrival.
            result.error_code = ErrorCode.REQUEST_TIMED_OUT
        if version >= 3:
            result.leader_log_start_offset = -1  # -1 on every error (KIP-1343)


def _reached(pending):
    def reached() -> bool:
        return all(not p.is_leader or p.low_watermark() >= required for p, _, required in pending)

    return reached
