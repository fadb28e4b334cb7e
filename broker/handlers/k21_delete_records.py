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
their log start offsets first and then wait for the disk, so one checkpoint write covers them. This
handler checks what Kafka's KafkaApis checks (version, authorization, existence); the rest, from the
internal-topic check to the wait, is ReplicaManager.delete_records, which the committed-offset
trimmer shares.

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

from broker.handlers import BrokerContext, handles
from broker.log import TopicPartition
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse

API_KEY = ApiKey.DELETE_RECORDS
_TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
_PartitionResult = _TopicResult.DeleteRecordsPartitionResult


@handles(API_KEY, "0-3")
async def delete_records(broker: BrokerContext, request: Request[DeleteRecordsRequest],
                         connection: RequestContext) -> DeleteRecordsResponse:
    body = request.body
    version = request.api_version
    leader_only = version >= 3 and body.leader_only
    started = time.perf_counter()
    def may_delete(name: str) -> bool:  # KIP-107 §3: DELETE on the topic
        return allowed(broker, connection, Operation.DELETE, ResourceType.TOPIC, name)

    response = await _delete_records(broker, body, version, leader_only, may_delete)
    broker.replicas.counters.delete_latency["leader_only" if leader_only else "all_replicas"].observe(
        time.perf_counter() - started)
    return response


async def _delete_records(broker: BrokerContext, body, version: int, leader_only: bool,
                          may_delete: Callable[[str], bool]) -> DeleteRecordsResponse:
    refused = version >= 3 and not broker.config.delete_records_v3_enable
    asked: dict[TopicPartition, int] = {}
    for topic in body.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            asked.pop(tp, None)
            asked[tp] = p.offset
    answers: dict[TopicPartition, ErrorCode] = {}  # the partitions refused here
    for tp in asked:
        topic = broker.topics.get(tp.topic)
        if refused:
            answers[tp] = ErrorCode.UNSUPPORTED_VERSION
        elif not may_delete(tp.topic):  # before existence, so that no one learns which topics exist
            answers[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None or tp.partition not in topic.replicas:
            answers[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    outcomes = await broker.replicas.delete_records({tp: offset for tp, offset in asked.items() if tp not in answers},
                                                    body.timeout_ms, leader_only)
    by_topic: dict[str, list] = {}
    for tp in asked:
        outcome = outcomes.get(tp)
        if outcome is None:
            result = _PartitionResult(partition_index=tp.partition, low_watermark=-1, error_code=answers[tp])
            leader_start = -1
        else:
            result = _PartitionResult(partition_index=tp.partition, low_watermark=outcome.low_watermark,
                                      error_code=outcome.error_code)
            leader_start = outcome.leader_log_start_offset
        if version >= 3:
            result.leader_log_start_offset = leader_start
        by_topic.setdefault(tp.topic, []).append(result)
    return DeleteRecordsResponse(throttle_time_ms=0, topics=[
        _TopicResult(name=name, partitions=results) for name, results in by_topic.items()])
