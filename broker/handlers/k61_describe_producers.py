"""DescribeProducers (key 61), version 0 (what `kafka-transactions describe-producers` sends).

Per partition, the producers its leader keeps state for (broker/replica/producer_state.py): id,
epoch, last sequence, the timestamp of its last batch or marker, the epoch of
the coordinator that wrote its last marker, and the first offset of its transaction open here.

As Kafka checks it (KafkaApis.handleDescribeProducersRequest), per topic first: an illegal name is
INVALID_TOPIC_EXCEPTION, no READ on the topic TOPIC_AUTHORIZATION_FAILED, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, for each partition asked; then per partition: no such partition
UNKNOWN_TOPIC_OR_PARTITION, not led here NOT_LEADER_OR_FOLLOWER.

Errors: NONE, INVALID_TOPIC_EXCEPTION, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.topic_checks import topic_error
from broker.replica import PartitionError
from broker.request_context import RequestContext
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeProducersRequest, DescribeProducersResponse

API_KEY = ApiKey.DESCRIBE_PRODUCERS
_Topic = DescribeProducersResponse.TopicResponse
_Partition = _Topic.PartitionResponse
_Producer = _Partition.ProducerState


async def _describe(broker: BrokerContext, topic: str, index: int) -> _Partition:
    try:
        partition = broker.replicas.partition(topic, index)
        partition.check_leader()
        await partition.load_producer_state()
    except PartitionError as exc:
        return _Partition(partition_index=index, error_code=exc.error_code, error_message=exc.message)
    producers = [
        _Producer(producer_id=pid, producer_epoch=entry.epoch, last_sequence=entry.last_seq,
                  last_timestamp=entry.last_timestamp,
                  coordinator_epoch=entry.coordinator_epoch, current_txn_start_offset=entry.txn_first_offset)
        for pid, entry in partition.producers.producers.items()]
    return _Partition(partition_index=index, error_code=ErrorCode.NONE, error_message=None,
                      active_producers=producers)


@handles(API_KEY, "0")
async def describe_producers(broker: BrokerContext, request: Request[DescribeProducersRequest],
                             connection: RequestContext
                             ) -> DescribeProducersResponse:
    topics = []
    for asked in request.body.topics:
        error = topic_error(broker, connection, asked.name, Operation.READ)
        if error is not None:
            partitions = [_Partition(partition_index=i, error_code=error.error_code, error_message=error.message)
                          for i in asked.partition_indexes]
        else:
            partitions = [await _describe(broker, asked.name, i) for i in asked.partition_indexes]
        topics.append(_Topic(name=asked.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
