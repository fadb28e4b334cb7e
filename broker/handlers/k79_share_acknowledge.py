"""ShareAcknowledge (key 79), versions 1-2 (KIP-932): a share group member acknowledges records it
was given by ShareFetch, without fetching more.

It continues the member's share session (ShareSessionEpoch 0 cannot open one:
INVALID_SHARE_SESSION_EPOCH; -1 ends it, releasing what the member still holds). Each
AcknowledgementBatch is accepted (1), released (2: Available again, or archived at the group's
share.delivery.count.limit), rejected (3), a gap (0) or, from v2 with IsRenewAck, renews the lock (4);
an offset the member does not hold refuses the partition's batches from there on
(INVALID_RECORD_STATE). v2 answers the lock duration (AcquisitionLockTimeoutMs). Needs READ on the
group and on each topic, as ShareFetch.

Errors: NONE, INVALID_GROUP_ID, INVALID_REQUEST, GROUP_AUTHORIZATION_FAILED, SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH (top level); TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_ID,
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, INVALID_RECORD_STATE, INVALID_REQUEST, and a state
write's failure as Kafka's leader maps it (COORDINATOR_NOT_AVAILABLE, UNKNOWN_SERVER_ERROR...) (per partition).
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.share_requests import acknowledge, begin, end_if_final, leader_of, resolve
from broker.request_context import RequestContext
from broker.share.partition import ShareError
from broker.share.persister import request_budget
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ShareAcknowledgeRequest, ShareAcknowledgeResponse

API_KEY = ApiKey.SHARE_ACKNOWLEDGE
_Topic = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
_Partition = _Topic.PartitionData
_Leader = _Partition.LeaderIdAndEpoch


@handles(API_KEY, "1-2")
async def share_acknowledge(broker: BrokerContext, request: Request[ShareAcknowledgeRequest],
                            connection: RequestContext) -> ShareAcknowledgeResponse:
    with request_budget():  # one deadline for the request's persister calls
        return await _share_acknowledge(broker, request, connection)


async def _share_acknowledge(broker: BrokerContext, request: Request[ShareAcknowledgeRequest],
                             connection: RequestContext) -> ShareAcknowledgeResponse:
    version, body = request.api_version, request.body
    try:
        share = await begin(broker, connection, body.group_id, body.member_id, body.share_session_epoch, fetch=False)
    except ShareError as exc:
        return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=exc.error_code,
                                        error_message=exc.message or None, acquisition_lock_timeout_ms=0,
                                        responses=[], node_endpoints=[])
    topics: dict = {}
    renew = version >= 2 and body.is_renew_ack
    for topic in body.topics:
        for part in topic.partitions:
            key = (topic.topic_id, part.partition_index)
            outcome = resolve(broker, connection, share, key)
            await acknowledge(broker, share, outcome, part.acknowledgement_batches, renew=renew)
            leader, epoch = leader_of(outcome)
            topics.setdefault(topic.topic_id, []).append(_Partition(
                partition_index=part.partition_index, error_code=outcome.acknowledge_error,
                error_message=outcome.acknowledge_message,
                current_leader=_Leader(leader_id=leader, leader_epoch=epoch)))
    end_if_final(broker, connection, share)
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                    acquisition_lock_timeout_ms=share.settings.limits.lock_ms,
                                    responses=[_Topic(topic_id=t, partitions=p) for t, p in topics.items()],
                                    node_endpoints=[])
