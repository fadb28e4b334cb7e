"""ShareFetch (key 78), versions 1-2 (KIP-932): a share group member's fetch from the partitions'
leader, with acknowledgements of what it was given before.

The share session (broker/share/sessions.py) holds the partitions fetched: ShareSessionEpoch 0 opens it
with the request's partitions, later epochs add the request's and drop ForgottenTopicsData, -1 ends it
(acknowledgements only: no records are acquired, and what the member still holds is released); an
epoch 0 request carrying acknowledgements is INVALID_REQUEST, as Kafka's newContext answers it.
Acknowledgements (1 accept, 2 release, 3 reject, 0 gap; 4 renew from v2 with IsRenewAck) are applied
first, per partition (AcknowledgeErrorCode: INVALID_RECORD_STATE for an offset the member does not
hold, INVALID_REQUEST for a malformed batch). Then every session partition is read from the first
Available offset in flight or the share-partition's end offset (broker/share/manager.py), and the
Available and new records found are acquired for the member, whole batches at a time, until
MaxRecords (a whole batch may take it over) or share.partition.max.record.locks; each answer carries
the acquired ranges with their delivery counts and the stored batches holding them, sent as they
are stored. Locks last the group's share.record.lock.duration.ms (AcquisitionLockTimeoutMs); records
delivered share.delivery.count.limit times are archived when released. When nothing is acquired the
request waits up to MaxWaitMs for records (appends and releases wake it). The answer lists the
partitions that acquired records, failed or had acknowledgements, as Kafka's. An empty GroupId is
answered, as Kafka 4.3.1 answers it, with UNKNOWN_SERVER_ERROR for each partition named; so is a
share-partition whose state its group never initialized (the leader makes none: broker/share/manager.py),
and a state read that fails otherwise as Kafka's leader maps it (COORDINATOR_NOT_AVAILABLE,
NOT_LEADER_OR_FOLLOWER). Needs READ on the group (top level GROUP_AUTHORIZATION_FAILED) and on each topic
(TOPIC_AUTHORIZATION_FAILED).

Errors: NONE, INVALID_REQUEST, GROUP_AUTHORIZATION_FAILED, SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED (top level); TOPIC_AUTHORIZATION_FAILED,
UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR,
INVALID_RECORD_STATE, COORDINATOR_NOT_AVAILABLE, GROUP_ID_NOT_FOUND, UNKNOWN_SERVER_ERROR (per partition).
"""

from __future__ import annotations

import contextlib

from broker.handlers import BrokerContext, handles
from broker.handlers.share_requests import (
    Key,
    Outcome,
    ShareRequest,
    acknowledge,
    begin,
    end_if_final,
    leader_of,
    resolve,
)
from broker.replica import PartitionError
from broker.request_context import RequestContext
from broker.share.manager import PartitionRead
from broker.share.partition import ShareError
from broker.share.persister import request_budget
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ShareFetchRequest, ShareFetchResponse

API_KEY = ApiKey.SHARE_FETCH
_Topic = ShareFetchResponse.ShareFetchableTopicResponse
_Partition = _Topic.PartitionData
_Leader = _Partition.LeaderIdAndEpoch
_Acquired = _Partition.AcquiredRecords


def _refused(error: ErrorCode, message: str | None = None) -> ShareFetchResponse:
    return ShareFetchResponse(throttle_time_ms=0, error_code=error, error_message=message,
                              acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])


@handles(API_KEY, "1-2")
async def share_fetch(broker: BrokerContext, request: Request[ShareFetchRequest],
                      connection: RequestContext) -> ShareFetchResponse:
    with request_budget():  # one deadline for the request's persister calls
        return await _share_fetch(broker, request, connection)


async def _share_fetch(broker: BrokerContext, request: Request[ShareFetchRequest],
                       connection: RequestContext) -> ShareFetchResponse:
    version, body = request.api_version, request.body
    if not body.group_id:  # Kafka 4.3.1 answers each partition UNKNOWN_SERVER_ERROR, not the request
        return _no_group(broker, body)
    try:
        share = await begin(broker, connection, body.group_id, body.member_id, body.share_session_epoch, fetch=True,
                            acknowledging=any(p.acknowledgement_batches for t in body.topics for p in t.partitions))
    except ShareError as exc:
        return _refused(exc.error_code, exc.message or None)
    renew = version >= 2 and body.is_renew_ack
    acked: set[Key] = set()
    for topic in body.topics:
        for part in topic.partitions:
            key = (topic.topic_id, part.partition_index)
            outcome = resolve(broker, connection, share, key)
            if part.acknowledgement_batches:
                acked.add(key)
                await acknowledge(broker, share, outcome, part.acknowledgement_batches, renew=renew)
            if not share.final:
                share.session.partitions[key] = None
    for forgotten in body.forgotten_topics_data:
        for index in forgotten.partitions:
            share.session.partitions.pop((forgotten.topic_id, index), None)
    reads: dict[Key, PartitionRead] = {}
    if not share.final and not renew:
        reads = await _acquire(broker, connection, share, body)
        if not any(r.acquired for r in reads.values()) and body.max_wait_ms > 0:
            if await _wait(broker, share, body.max_wait_ms):
                reads = await _acquire(broker, connection, share, body)
    end_if_final(broker, connection, share)
    return _answer(share, acked, reads)


async def _acquire(broker: BrokerContext, connection: RequestContext, share: ShareRequest,
                   body: ShareFetchRequest) -> dict[Key, PartitionRead]:
    reads: dict[Key, PartitionRead] = {}
    bytes_left, records_left = body.max_bytes, body.max_records
    for key in list(share.session.partitions):
        outcome = resolve(broker, connection, share, key)
        if outcome.partition is None or bytes_left <= 0 or records_left <= 0:
            continue
        read = await broker.shares.fetch(share.group_id, share.member_id, outcome.partition, share.settings,
                                         bytes_left, records_left)
        reads[key] = read
        if read.error != ErrorCode.NONE:
            outcome.error = read.error
        bytes_left -= len(read.records)
        records_left -= sum(a.last - a.first + 1 for a in read.acquired)
    return reads


async def _wait(broker: BrokerContext, share: ShareRequest, max_wait_ms: int) -> bool:
    """Park until a session partition has records to acquire, or MaxWaitMs passes."""
    partitions = [o.partition for o in share.outcomes.values() if o.partition is not None]
    if not partitions:
        return False

    def ready() -> bool:
        return any(broker.shares.ready_now(share.group_id, p, share.settings) for p in partitions)

    return await broker.replicas.fetches.wait([p.topic_partition for p in partitions], ready, max_wait_ms)


def _no_group(broker: BrokerContext, body: ShareFetchRequest) -> ShareFetchResponse:
    lock_ms = broker.group_configs.broker["group.share.record.lock.duration.ms"]
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            outcome = Outcome()
            topic = broker.topics.by_id(t.topic_id)
            if topic is not None:
                with contextlib.suppress(PartitionError):
                    outcome.partition = broker.replicas.partition_of(topic, p.partition_index)
            leader, epoch = leader_of(outcome)
            parts.append(_Partition(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                    current_leader=_Leader(leader_id=leader, leader_epoch=epoch), records=b"",
                                    acquired_records=[]))
        topics.append(_Topic(topic_id=t.topic_id, partitions=parts))
    return ShareFetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                              acquisition_lock_timeout_ms=lock_ms, node_endpoints=[], responses=topics)


def _answer(share: ShareRequest, acked: set[Key], reads: dict[Key, PartitionRead]) -> ShareFetchResponse:
    """The partitions with records, an error or acknowledgements answered (Kafka leaves the others out,
    but for a new session's first answer, which lists every partition asked)."""
    topics: dict = {}
    for key, outcome in share.outcomes.items():
        read = reads.get(key, PartitionRead())
        if key not in acked and not read.acquired and outcome.error == ErrorCode.NONE and not share.opened:
            continue
        leader, epoch = leader_of(outcome)
        topics.setdefault(key[0], []).append(_Partition(
            partition_index=key[1], error_code=outcome.error, error_message=None,
            acknowledge_error_code=outcome.acknowledge_error, acknowledge_error_message=outcome.acknowledge_message,
            current_leader=_Leader(leader_id=leader, leader_epoch=epoch), records=read.records,
            acquired_records=[_Acquired(first_offset=a.first, last_offset=a.last, delivery_count=a.delivery_count)
                              for a in read.acquired]))
    return ShareFetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                              acquisition_lock_timeout_ms=share.settings.limits.lock_ms,
                              responses=[_Topic(topic_id=t, partitions=p) for t, p in topics.items()],
                              node_endpoints=[])
