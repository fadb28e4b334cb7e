"""OffsetForLeaderEpoch (key 23), versions 2-4.

For each partition, the largest leader epoch at or below the requested one that this replica's
leader epoch cache knows, and where it ends: the start offset of the next epoch, or the log end
offset for the latest epoch (LeaderEpochFileCache.endOffsetFor). An epoch older than the first one
cached gets LeaderEpoch -1, EndOffset -1 with NONE. A new leader notes its epoch at the log end
offset when it takes over, so an empty partition answers (epoch, 0). CurrentLeaderEpoch is checked
as in Fetch: FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH when newer, -1 skips the check.
ReplicaId (v3+) is ignored: only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere), and Ebb's
followers learn where they diverge from DivergingEpoch in Fetch instead.

Errors: NONE, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.replica import PartitionError
from broker.request_context import RequestContext
from broker.security.access import allowed, allowed_on_cluster
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
_TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_EpochEndOffset = _TopicResult.EpochEndOffset


@handles(API_KEY, "2-4")
async def offset_for_leader_epoch(broker: BrokerContext,
                                  request: Request[OffsetForLeaderEpochRequest],
                                  connection: RequestContext) -> OffsetForLeaderEpochResponse:
    topics = []
    for topic in request.body.topics:
        results: list[_EpochEndOffset] = []
        topics.append(_TopicResult(topic=topic.topic, partitions=results))
        # a replica needs CLUSTER_ACTION, a client DESCRIBE on the topic
        may = (allowed_on_cluster(broker, connection, Operation.CLUSTER_ACTION) if request.body.replica_id >= 0
               else allowed(broker, connection, Operation.DESCRIBE, ResourceType.TOPIC, topic.topic))
        for asked in topic.partitions:
            result = _EpochEndOffset(error_code=ErrorCode.NONE, partition=asked.partition, leader_epoch=-1,
                                     end_offset=-1)
            results.append(result)
            if not may:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            try:
                partition = broker.replicas.partition(topic.topic, asked.partition)
                partition.check_leader()
                partition.check_leader_epoch(asked.current_leader_epoch)
            except PartitionError as exc:
                result.error_code = exc.error_code
                continue
            log_ = partition.log
            result.leader_epoch, result.end_offset = log_.epoch_cache.end_offset_for(asked.leader_epoch,
                                                                                     log_.log_end_offset)
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
