"""DescribeErasure (key 10000, Ebb's own), version 0: what this broker's replica of each partition asked
has physically erased (broker/log/erasure.py, `erasure.max.delay.ms`).

Every broker answers for its own replica, leader or follower, so a client learns every replica's
erased offset by asking each replica's broker (`ebb offsets --erased`, `ebb delete-records
--wait-erased`); Kafka's Fetch and DescribeLogDirs are left as Kafka defines them.

Checked as DescribeProducers checks, with DESCRIBE in place of READ: per topic an illegal name is
INVALID_TOPIC_EXCEPTION, no DESCRIBE on the topic TOPIC_AUTHORIZATION_FAILED, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION; per partition no such partition UNKNOWN_TOPIC_OR_PARTITION, no replica on
this broker NOT_LEADER_OR_FOLLOWER, an offline log KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.topic_checks import topic_error
from broker.log import LogError
from broker.replica import PartitionError
from broker.request_context import RequestContext
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeErasureRequest, DescribeErasureResponse

API_KEY = ApiKey.DESCRIBE_ERASURE
_Topic = DescribeErasureResponse.TopicResponse
_Partition = _Topic.PartitionResponse


def _describe(broker: BrokerContext, topic: str, index: int) -> _Partition:
    try:
        log = broker.replicas.partition(topic, index).log
        return _Partition(partition_index=index, error_code=ErrorCode.NONE, error_message=None,
                          log_start_offset=log.log_start_offset, erased_offset=log.erased_offset,
                          erasable_offset=log.erasable_offset(), max_delay_ms=log.config.erasure_max_delay_ms)
    except (PartitionError, LogError) as exc:
        return _Partition(partition_index=index, error_code=exc.error_code, error_message=exc.message)


@handles(API_KEY, "0")
async def describe_erasure(broker: BrokerContext, request: Request[DescribeErasureRequest], connection: RequestContext
                           ) -> DescribeErasureResponse:
    topics = []
    for asked in request.body.topics:
        error = topic_error(broker, connection, asked.name, Operation.DESCRIBE)
        if error is not None:
            partitions = [_Partition(partition_index=i, error_code=error.error_code, error_message=error.message)
                          for i in asked.partition_indexes]
        else:
            partitions = [_describe(broker, asked.name, i) for i in asked.partition_indexes]
        topics.append(_Topic(name=asked.name, partitions=partitions))
    return DescribeErasureResponse(throttle_time_ms=0, broker_id=broker.node_id, topics=topics)
