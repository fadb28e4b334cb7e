"""DeleteTopics (key 20), versions 1-6.

Topics are named in v1-5 (TopicNames) and by name or by id in v6 (Topics). On one broker deletion is
immediate: the topic is marked under /admin/delete_topics, removed from the store, and its partition
directories are renamed `-delete` for removal after file.delete.delay.ms (TopicManager.delete); a stop
in between finishes the deletion at start-up. In a cluster the mark is all this broker writes; every
broker drops its replicas and the controller finishes the deletion (broker/cluster/deletion.py). The
answer waits for that up to timeout_ms, then says REQUEST_TIMED_OUT while the deletion goes on (a
replica's broker is down, say) — as Kafka does.

Checks, as Kafka's controller makes them: a v6 entry with neither name nor id, or with both, is
INVALID_REQUEST; a name or id given twice gets one INVALID_REQUEST result; a name whose id another
entry already gave is INVALID_REQUEST. Unknown names get UNKNOWN_TOPIC_OR_PARTITION, unknown ids
UNKNOWN_TOPIC_ID (also a topic a cluster has marked for deletion already, which Kafka 4.3.1 has
removed: nothing is charged for it). Internal topics (__consumer_offsets, ...) cannot be deleted:
INVALID_TOPIC_EXCEPTION. With delete.topic.enable=false every topic fails with
TOPIC_DELETION_DISABLED (v3+) or INVALID_REQUEST (v1-2). Results carry the name, the id (v6) and an
error message (v5+).

With an authorizer a topic needs DELETE: by name, TOPIC_AUTHORIZATION_FAILED before its existence is
looked at; by id, one the client may not DESCRIBE is UNKNOWN_TOPIC_ID (its existence stays hidden).

A topic's partitions are charged to the client's controller_mutation_rate once these checks passed
(broker/quotas/mutations.py: refused from v5, throttled below).

Errors: NONE, THROTTLING_QUOTA_EXCEEDED (v5+), TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
INVALID_TOPIC_EXCEPTION, INVALID_REQUEST, TOPIC_DELETION_DISABLED, REQUEST_TIMED_OUT (cluster).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import structlog

from broker.handlers import BrokerContext, handles
from broker.quotas.mutations import MutationCharge, ThrottlingQuotaExceeded
from broker.request_context import RequestContext
from broker.security.access import allowed
from broker.topic_placement import TopicError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse

log = structlog.get_logger("delete_topics")

API_KEY = ApiKey.DELETE_TOPICS
ZERO_UUID = uuid.UUID(int=0)
Result = DeleteTopicsResponse.DeletableTopicResult


@handles(API_KEY, "1-6")
async def delete_topics(broker: BrokerContext, request: Request[DeleteTopicsRequest],
                        connection: RequestContext) -> DeleteTopicsResponse:
    version, body = request.api_version, request.body
    rows = [(t.name, t.topic_id) for t in body.topics] if version >= 6 else [(n, ZERO_UUID) for n in body.topic_names]
    if not broker.config.delete_topic_enable:
        error = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
        return DeleteTopicsResponse(responses=[
            Result(name=name, topic_id=topic_id, error_code=error, error_message="Topic deletion is disabled.")
            for name, topic_id in rows])
    name_counts = Counter(name for name, topic_id in rows if name is not None and topic_id == ZERO_UUID)
    id_counts = Counter(topic_id for name, topic_id in rows if name is None and topic_id != ZERO_UUID)
    results: list[DeleteTopicsResponse.DeletableTopicResult] = []
    reported: set = set()
    pending: list[Result] = []  # marked in a cluster, not deleted yet
    ids_given = {topic_id for topic_id, count in id_counts.items() if count == 1}
    quota = broker.quotas.mutations.for_request(request, connection)
    before = {name: broker.topics.get(name) for name in name_counts}  # deletions below must not change this
    for name, topic_id in rows:
        if name is None and topic_id == ZERO_UUID:
            results.append(_result(None, ZERO_UUID, ErrorCode.INVALID_REQUEST,
                                   "Neither topic name nor id were specified."))
        elif name is not None and topic_id != ZERO_UUID:
            results.append(_result(name, topic_id, ErrorCode.INVALID_REQUEST,
                                   "You may not specify both topic name and topic id."))
        elif name is not None:
            if name in reported:
                continue
            reported.add(name)
            if name_counts[name] > 1:
                results.append(_result(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
                continue
            if not allowed(broker, connection, Operation.DELETE, ResourceType.TOPIC, name):
                results.append(_result(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       "DELETE on the topic is needed to delete it."))
                continue
            topic = before[name]
            if topic is not None and topic.topic_id in ids_given:
                results.append(_result(name, topic.topic_id, ErrorCode.INVALID_REQUEST,
                                       "The provided topic name maps to an ID that was already supplied."))
                continue
            results.append(await _delete(broker, name, topic.topic_id if topic else ZERO_UUID, version, pending, quota))
        else:
            if topic_id in reported:
                continue
            reported.add(topic_id)
            if id_counts[topic_id] > 1:
                results.append(_result(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id."))
                continue
            topic = broker.topics.by_id(topic_id)
            if topic is None or not allowed(broker, connection, Operation.DESCRIBE, ResourceType.TOPIC, topic.name):
                results.append(_result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID,
                                       "This server does not host this topic ID."))
                continue
            if not allowed(broker, connection, Operation.DELETE, ResourceType.TOPIC, topic.name):
                results.append(_result(None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       "DELETE on the topic is needed to delete it."))
                continue
            results.append(await _delete(broker, topic.name, topic_id, version, pending, quota, by_id=True))
    if pending:
        await _await_deletions(broker, pending, body.timeout_ms)
    return DeleteTopicsResponse(responses=results, throttle_time_ms=quota.finish(connection))


async def _await_deletions(broker: BrokerContext, pending: list[Result], timeout_ms: int) -> None:
    """Wait (together, up to timeout_ms) for the controller to finish the marked deletions."""
    cluster = broker.cluster
    assert cluster is not None  # deletions are left pending only in a cluster, where the controller does them
    done = await asyncio.gather(*(cluster.deletions.wait_deleted(_name(r), timeout_ms) for r in pending))
    for result, finished in zip(pending, done, strict=True):
        if finished:
            log.info("deleted topic on request", topic=result.name)
        else:
            log.info("topic deletion still in progress at the request's timeout", topic=result.name)
            result.error_code = ErrorCode.REQUEST_TIMED_OUT
            result.error_message = ("The topic is marked for deletion; it goes once every replica's broker "
                                    "has dropped it.")


async def _delete(broker: BrokerContext, name: str, topic_id: uuid.UUID, version: int,
                  pending: list[Result], quota: MutationCharge, by_id: bool = False
                  ) -> DeleteTopicsResponse.DeletableTopicResult:
    topic = broker.topics.get(name)
    if topic is not None and topic.internal:
        return _result(name, topic_id, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Internal topic {name} cannot be deleted.")
    try:
        done = await broker.topics.delete(name, charge=quota.charge)
    except ThrottlingQuotaExceeded as exc:
        return _result(name, topic_id, exc.error_code, exc.message)
    except TopicError as exc:
        error = exc.error_code
        if error == ErrorCode.TOPIC_DELETION_DISABLED and version < 3:
            error = ErrorCode.INVALID_REQUEST
        if by_id and error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:  # gone meanwhile, or marked in a cluster
            return _result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        return _result(name, topic_id, error, exc.message)
    result = _result(name, topic_id, ErrorCode.NONE, None)
    if done:
        log.info("deleted topic on request", topic=name)
    else:
        pending.append(result)
    return result


def _name(result: Result) -> str:
    assert result.name is not None  # _delete names every result it leaves pending
    return result.name


def _result(name: str | None, topic_id: uuid.UUID, error: ErrorCode, message: str | None) -> Result:
    return Result(name=name, topic_id=topic_id, error_code=error, error_message=message)
