"""OffsetCommit (key 8), versions 2-10 (v0-1 are gone from Kafka 4; librdkafka's feature check only
needs v2 in the range; v10, KIP-848: topics by TopicId, an unknown id UNKNOWN_TOPIC_ID).

Stores each partition's offset (with its leader epoch, v6+, and metadata string) for the group, as a
record in `__consumer_offsets`; answered once the record is replicated. The group rules are
broker/group/offsets.py's (Kafka's validateOffsetCommit):
- a member commits with its member id and generation (v7+: and GroupInstanceId);
- generation -1 with an empty member id commits for a group without members (admin tools, consumers
  using assign()); an unknown group is then created without a protocol type;
- v2-v4 RetentionTimeMs other than -1 gives these offsets their own expiry (OffsetCommitValue v1).
Per partition first: a topic or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION, a
metadata string over offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE; a group-level error
applies to every other partition of the request.

Errors: NONE, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID (v10), OFFSET_METADATA_TOO_LARGE, ILLEGAL_GENERATION (v0-8
unknown group with a generation), GROUP_ID_NOT_FOUND (v9, the same), UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
INVALID_COMMIT_OFFSET_SIZE (the records do not fit a batch).
"""

from __future__ import annotations

from broker.group import GroupError
from broker.handlers import BrokerContext, handles
from broker.handlers.offset_commits import gather_commits
from broker.request_context import RequestContext
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import OffsetCommitRequest, OffsetCommitResponse
from protocol.wire import ZERO_UUID

API_KEY = ApiKey.OFFSET_COMMIT
_Topic = OffsetCommitResponse.OffsetCommitResponseTopic
_Partition = _Topic.OffsetCommitResponsePartition


@handles(API_KEY, "2-10")
async def offset_commit(broker: BrokerContext, request: Request[OffsetCommitRequest],
                        connection: RequestContext) -> OffsetCommitResponse:
    version, body = request.api_version, request.body
    results, pending = gather_commits(
        broker, connection, body.group_id, body.topics,
        lambda index: _Partition(partition_index=index, error_code=ErrorCode.NONE), with_leader_epoch=version >= 6,
        by_id=version >= 10)
    if pending:
        try:
            errors = await broker.groups.offsets.commit(
                body.group_id, body.generation_id_or_member_epoch, body.member_id,
                body.group_instance_id if version >= 7 else None,
                body.retention_time_ms if version <= 4 else -1,
                [commit for _, commit in pending], version)
        except GroupError as exc:
            errors = [exc.error_code] * len(pending)
        for (result, _), error in zip(pending, errors, strict=True):
            result.error_code = error
    # one result per topic asked, in order: v10 answers each by the id it was asked with
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        _Topic(name=name, topic_id=asked.topic_id if version >= 10 else ZERO_UUID, partitions=partitions)
        for (name, partitions), asked in zip(results, body.topics, strict=True)])
