"""DescribeTopicPartitions (key 75), version 0 (KIP-966).

What Kafka 4's Admin.describeTopics and `kafka-topics --describe` ask before they fall back to
Metadata: the topics in name order with their partitions, at most ResponsePartitionLimit partitions
(capped at 2,000, Kafka's default) per answer, and a cursor where the next request goes on. An empty
topic list means every topic the caller may describe (the others stay unseen); a named topic that
does not exist is UNKNOWN_TOPIC_OR_PARTITION, one the caller may not describe
TOPIC_AUTHORIZATION_FAILED. Topics before the cursor's are left out, and the cursor's topic starts at
its partition. Partitions are described as in Metadata (broker/handlers/cluster_view.py). Ebb has no
eligible leader replicas (KIP-966 needs KRaft), so both ELR lists are empty, as Kafka's are while
every replica is in sync. Authorized operations are always filled in, for a missing topic too.

Errors: NONE, UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, LEADER_NOT_AVAILABLE (partition).
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.acl_operations import TOPIC_OPERATIONS, authorized
from broker.handlers.cluster_view import offline_logs, partition_views
from broker.request_context import RequestContext
from broker.security.access import allowed
from broker.topic import INTERNAL_TOPICS
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse

API_KEY = ApiKey.DESCRIBE_TOPIC_PARTITIONS
MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit

TopicResult = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
PartitionResult = TopicResult.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor


@handles(API_KEY, "0")
async def describe_topic_partitions(broker: BrokerContext, request: Request[DescribeTopicPartitionsRequest],
                                    connection: RequestContext
                                    ) -> DescribeTopicPartitionsResponse:
    body = request.body

    def may_describe(name: str) -> bool:
        return allowed(broker, connection, Operation.DESCRIBE, ResourceType.TOPIC, name)

    every_topic = not body.topics
    if every_topic:
        names = sorted(t.name for t in broker.topics.all() if may_describe(t.name))
    else:
        names = sorted({t.name for t in body.topics})
    start_topic, start_partition = ("", 0) if body.cursor is None else (body.cursor.topic_name,
                                                                         body.cursor.partition_index)
    budget = min(body.response_partition_limit, MAX_PARTITIONS)
    offline = offline_logs(broker)
    response = DescribeTopicPartitionsResponse()
    for name in names:
        if name < start_topic:
            continue
        first = start_partition if name == start_topic else 0
        if budget <= 0:
            response.next_topic_partition = Cursor(topic_name=name, partition_index=first)
            break
        topic = broker.topics.get(name)
        if not may_describe(name):
            response.topics.append(TopicResult(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                               is_internal=name in INTERNAL_TOPICS, partitions=[]))
            continue
        if topic is None:  # Kafka still says what the caller could do with such a topic
            response.topics.append(TopicResult(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, is_internal=name in INTERNAL_TOPICS,
                partitions=[], topic_authorized_operations=authorized(broker, connection, ResourceType.TOPIC, name,
                                                                      TOPIC_OPERATIONS)))
            continue
        views = [v for v in partition_views(broker, topic, offline) if v.partition >= first]
        taken, budget = views[:budget], budget - len(views[:budget])
        response.topics.append(TopicResult(
            error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id, is_internal=topic.internal,
            partitions=[PartitionResult(error_code=v.error_code, partition_index=v.partition, leader_id=v.leader,
                                        leader_epoch=v.leader_epoch, replica_nodes=v.replicas, isr_nodes=v.isr,
                                        eligible_leader_replicas=[], last_known_elr=[], offline_replicas=v.offline)
                        for v in taken],
            topic_authorized_operations=authorized(broker, connection, ResourceType.TOPIC, name, TOPIC_OPERATIONS)))
        if len(taken) < len(views):
            response.next_topic_partition = Cursor(topic_name=name, partition_index=views[len(taken)].partition)
            break
    return response
