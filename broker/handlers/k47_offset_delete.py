"""OffsetDelete (key 47), version 0.

Removes a group's committed offsets for some partitions (tombstones in `__consumer_offsets`). A
consumer group with members keeps the offsets of topics it subscribes to: those partitions answer
GROUP_SUBSCRIBED_TO_TOPIC; a group with members that is not a consumer group is NON_EMPTY_GROUP.
Partitions without an offset answer NONE. A topic or partition that does not exist is
UNKNOWN_TOPIC_OR_PARTITION. A group-level error comes with no topics.

Errors: NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC,
UNKNOWN_TOPIC_OR_PARTITION, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
"""

from __future__ import annotations

from broker.group import GroupError
from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse

API_KEY = ApiKey.OFFSET_DELETE
_Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_Partition = _Topic.OffsetDeleteResponsePartition


@handles(API_KEY, "0")
async def offset_delete(broker: BrokerContext, request: Request[OffsetDeleteRequest],
                        connection: RequestContext) -> OffsetDeleteResponse:
    body = request.body
    if not allowed(broker, connection, Operation.DELETE, ResourceType.GROUP, body.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    asked: list[tuple[str, int]] = []
    unknown: set[tuple[str, int]] = set()
    refused: set[tuple[str, int]] = set()  # topics the client may not READ
    for topic in body.topics:
        known = broker.topics.get(topic.name)
        readable = allowed(broker, connection, Operation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            asked.append(key)
            if not readable:
                refused.add(key)
            elif known is None or p.partition_index not in known.replicas:
                unknown.add(key)
    try:
        results = await broker.groups.offsets.delete(body.group_id,
                                                     [k for k in asked if k not in unknown and k not in refused])
    except GroupError as exc:
        return OffsetDeleteResponse(error_code=exc.error_code, throttle_time_ms=0, topics=[])
    by_topic: dict[str, list] = {}
    for key in asked:
        error = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if key in refused
                 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if key in unknown else results[key])
        partitions = by_topic.setdefault(key[0], [])
        if all(p.partition_index != key[1] for p in partitions):
            partitions.append(_Partition(partition_index=key[1], error_code=error))
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        _Topic(name=name, partitions=partitions) for name, partitions in by_topic.items()])
