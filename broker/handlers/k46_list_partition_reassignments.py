"""ListPartitionReassignments (key 46), version 0 (KIP-455).

`kafka-reassign-partitions --verify` and `--list`. The reassignments under way, as the controller
holds them (broker/cluster/reassignment.py): per partition every replica it has while it moves, the
joining ones and the leaving ones. Null Topics lists all; named topics list only their partitions
that are moving, and a topic with none (or that does not exist) is left out, as in Kafka. Other
brokers forward the request to the controller (handlers/controller_requests.py); on one broker
without ZooKeeper nothing is ever under way.

With an authorizer the caller needs DESCRIBE on the cluster; without it the top level answers
CLUSTER_AUTHORIZATION_FAILED (the asked partitions listed empty, as Kafka's getErrorResponse).

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, NOT_CONTROLLER.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.controller_requests import cluster_allowed, on_the_controller
from broker.request_context import RequestContext
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
_Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
_Partition = _Topic.OngoingPartitionReassignment


@handles(API_KEY, "0")
async def list_partition_reassignments(broker: BrokerContext, request: Request[ListPartitionReassignmentsRequest],
                                       connection: RequestContext
                                       ) -> ListPartitionReassignmentsResponse:
    body = request.body
    if not cluster_allowed(broker, request, connection, Operation.DESCRIBE):
        return _refused(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")

    async def listed() -> ListPartitionReassignmentsResponse:
        by_topic: dict[str, list[_Partition]] = {}
        cluster = broker.cluster
        if cluster is not None:
            cluster.controller.require_active()
            asked = None if body.topics is None else {t.name: list(t.partition_indexes) for t in body.topics}
            for moving in cluster.controller.reassignments.ongoing(asked):
                by_topic.setdefault(moving.topic, []).append(_Partition(
                    partition_index=moving.partition, replicas=moving.replicas, adding_replicas=moving.adding,
                    removing_replicas=moving.removing))
        return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                                  topics=[_Topic(name=n, partitions=ps) for n, ps in by_topic.items()])

    return await on_the_controller(broker, request, listed, lambda code, message: _refused(body, code, message))


def _refused(body: ListPartitionReassignmentsRequest, code: ErrorCode, message: str
             ) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=code, error_message=message, topics=[
        _Topic(name=t.name, partitions=[_Partition(partition_index=p, replicas=[], adding_replicas=[],
                                                   removing_replicas=[]) for p in t.partition_indexes])
        for t in body.topics or []])
