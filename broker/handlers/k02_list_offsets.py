"""ListOffsets (key 2), versions 1-10.

Per partition (KafkaApis.handleListOffsetRequestV1AndAbove, ReplicaManager.fetchOffset,
Partition.fetchOffsetForTimestamp):
- -1 LATEST: the high watermark for consumers (ReplicaId -1) reading uncommitted, the last stable
  offset for READ_COMMITTED (equal while no transaction is open), the log end offset for
  brokers and the debugging id (-2); LeaderEpoch is the current leader epoch;
- ReplicaId -2 (the debugging id, what Kafka's GetOffsetShell-style tools send) is answered by a
  follower too, from its own log (log end, log start, timestamps); any other id needs the leader;
- -2 EARLIEST and -4 EARLIEST_LOCAL (v8+): the log start offset (no tiered storage, so the local
  start is the start);
- -3 MAX_TIMESTAMP (v7+): the first record holding the largest timestamp, with that timestamp (the
  log names the batch from segment metadata; that one batch is decoded, off the event loop);
- -5 LATEST_TIERED (v9+): no tiered storage, so offset -1, timestamp -1 (Kafka's answer);
- t >= 0: the first record at or after the log start offset whose timestamp is >= t (the log finds
  the batch from its time index and decodes it to name the record, as Kafka does);
- a result at or past the last fetchable offset, or none: Offset -1, Timestamp -1, NONE;
- a special timestamp below the version that introduced it, or an unknown negative one:
  UNSUPPORTED_VERSION for that partition;
- a partition listed twice in one request: INVALID_REQUEST for it;
- CurrentLeaderEpoch (v4+) checks as in Fetch: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.

Errors: NONE, TOPIC_AUTHORIZATION_FAILED (with an authorizer: DESCRIBE on the topic),
UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_VERSION, INVALID_REQUEST,
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from collections import Counter

import structlog

from broker.handlers import BrokerContext, handles
from broker.log import LogError, ReadBound
from broker.replica import Partition, PartitionError
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, IsolationLevel, Operation, ResourceType, SpecialTimestamp
from protocol.errors import ErrorCode, ProtocolError
from protocol.framing import Request
from protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from protocol.records import iter_batches

log = structlog.get_logger("list_offsets")

API_KEY = ApiKey.LIST_OFFSETS
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2  # answered by any replica, leader or follower (Kafka's fetchOnlyFromLeader=false)
MIN_VERSION: dict[int, int] = {  # the first version that knows each special timestamp
    SpecialTimestamp.EARLIEST: 1, SpecialTimestamp.LATEST: 1, SpecialTimestamp.MAX_TIMESTAMP: 7,
    SpecialTimestamp.EARLIEST_LOCAL: 8, SpecialTimestamp.LATEST_TIERED: 9,
}
_TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
_PartitionResponse = _TopicResponse.ListOffsetsPartitionResponse


def _error(index: int, code: ErrorCode) -> _PartitionResponse:
    return _PartitionResponse(partition_index=index, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1)


@handles(API_KEY, "1-10")
async def list_offsets(broker: BrokerContext, request: Request[ListOffsetsRequest],
                       connection: RequestContext) -> ListOffsetsResponse:
    body = request.body
    version = request.api_version
    counts = Counter((t.name, p.partition_index) for t in body.topics for p in t.partitions)
    client = body.replica_id == CONSUMER_REPLICA_ID
    leader_only = body.replica_id != DEBUGGING_REPLICA_ID
    committed = version >= 2 and body.isolation_level == IsolationLevel.READ_COMMITTED
    topics: list[_TopicResponse] = []
    for topic in body.topics:
        results: list[_PartitionResponse] = []
        topics.append(_TopicResponse(name=topic.name, partitions=results))
        may_describe = allowed(broker, connection, Operation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for asked in topic.partitions:
            index = asked.partition_index
            if not may_describe:
                results.append(_error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if counts[(topic.name, index)] > 1:
                results.append(_error(index, ErrorCode.INVALID_REQUEST))
                continue
            timestamp = asked.timestamp
            if timestamp < 0 and version < MIN_VERSION.get(timestamp, 1 << 15):
                results.append(_error(index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            try:
                partition = broker.replicas.partition(topic.name, index)
                if leader_only:
                    partition.check_leader()
                partition.check_leader_epoch(asked.current_leader_epoch)
                results.append(await _offset(broker, partition, index, timestamp, client, committed))
            except (PartitionError, LogError) as exc:
                results.append(_error(index, exc.error_code))
    if version < 4:  # LeaderEpoch is not ignorable: versions without it must carry the default
        for answered in topics:
            for result in answered.partitions:
                result.leader_epoch = -1
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


async def _offset(broker: BrokerContext,
                  partition: Partition, index: int, timestamp: int, client: bool, committed: bool
                  ) -> _PartitionResponse:
    log_ = partition.log
    if client and committed:
        await partition.load_producer_state()  # the open transactions: loaded once, if nothing has yet
        last_fetchable = partition.last_stable_offset
    elif client:
        last_fetchable = partition.high_watermark
    else:
        last_fetchable = partition.log_end_offset
    if timestamp == SpecialTimestamp.LATEST:
        return _PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, timestamp=-1,
                                  offset=last_fetchable, leader_epoch=partition.leader_epoch)
    if timestamp == SpecialTimestamp.LATEST_TIERED:
        return _PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, timestamp=-1, offset=-1,
                                  leader_epoch=-1)
    found = log_.offset_for_timestamp(timestamp)
    if found is None:
        return _error(index, ErrorCode.NONE)
    if timestamp in (SpecialTimestamp.EARLIEST, SpecialTimestamp.EARLIEST_LOCAL):
        return _PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, timestamp=-1,
                                  offset=found.offset, leader_epoch=found.leader_epoch)
    if found.offset >= last_fetchable:
        return _error(index, ErrorCode.NONE)
    record_timestamp: int = found.timestamp
    offset: int = found.offset
    if timestamp == SpecialTimestamp.MAX_TIMESTAMP:  # the log answers with the batch; Kafka names the record
        record_timestamp, offset = await _exact_record(broker, partition, offset, record_timestamp)
    if offset >= last_fetchable:
        return _error(index, ErrorCode.NONE)
    return _PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, timestamp=record_timestamp,
                              offset=offset, leader_epoch=log_.epoch_cache.epoch_at(offset))


async def _exact_record(broker: BrokerContext,
                        partition: Partition, batch_offset: int, max_timestamp: int) -> tuple[int, int]:
    """MAX_TIMESTAMP: the log names the batch holding the largest timestamp (its first offset, or the
    log start offset inside it); decode that one batch, off the event loop, for the first record at
    or after that offset carrying the batch's max timestamp. Falls back to the batch answer if the
    batch cannot be decoded."""
    try:
        read = partition.log.read(batch_offset, 1, bound=ReadBound.LOG_END, min_one_batch=True)
    except LogError:
        return max_timestamp, batch_offset
    data = (await broker.replicas.read_slices([read.slices[:1]]))[0]
    try:
        for batch in iter_batches(data, allow_partial_tail=True):
            for record in await broker.replicas.run_io(_records, batch):
                if record.offset >= batch_offset and record.timestamp >= max_timestamp:
                    return record.timestamp, record.offset
    except ProtocolError as exc:
        log.warning("cannot decode a batch for a max timestamp lookup; answering with its first offset",
                    partition=str(partition.topic_partition), offset=batch_offset, error=exc.message)
    return max_timestamp, batch_offset


def _records(batch) -> list:
    return list(batch.records())
