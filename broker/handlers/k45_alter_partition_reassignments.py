"""AlterPartitionReassignments (key 45), versions 0-1 (KIP-455; v1 adds KIP-860's
AllowReplicationFactorChange).

`kafka-reassign-partitions --execute` and `--cancel`. The controller records each partition's
reassignment and carries it out (broker/cluster/reassignment.py): the new replicas copy the log from
the leader's log start offset, join the ISR, leadership moves off leaving replicas, and the leaving
replicas delete their logs. The answer comes once the reassignment is recorded, not when it is done
(ListPartitionReassignments shows it until then). Replicas null cancels the reassignment under way:
the original replicas come back. Per partition, in Kafka's order:
- topic or partition unknown, or the topic marked for deletion: UNKNOWN_TOPIC_OR_PARTITION;
- cancel with nothing under way: NO_REASSIGNMENT_IN_PROGRESS; a cancel that would need an unclean
  election (no original replica in sync): INVALID_REPLICA_ASSIGNMENT;
- a target that is empty, names a broker twice or a broker that is not registered:
  INVALID_REPLICA_ASSIGNMENT;
- AllowReplicationFactorChange false and a target of another size: INVALID_REPLICATION_FACTOR.
A target that moves nothing (the same replicas, reordered or not) is recorded and finishes at once.
Other brokers forward the request to the controller (handlers/controller_requests.py). Without
ZooKeeper there is one broker and no reassignment can move anything; the same checks answer, and a
valid target (that broker alone) is recorded as done.

With an authorizer the caller needs ALTER on the cluster; without it every partition and the top
level answer CLUSTER_AUTHORIZATION_FAILED, as Kafka's getErrorResponse.

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, NOT_CONTROLLER, UNKNOWN_TOPIC_OR_PARTITION,
NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR; a partition whose
metadata write fails: KAFKA_STORAGE_ERROR (the store's disk), REQUEST_TIMED_OUT (ZooKeeper unreachable).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from broker.cluster.reassignment import ReassignmentResult
from broker.cluster.store import StoreError, store_error_answer
from broker.handlers import handles
from broker.handlers.controller_requests import (
    ControllerRole,
    ControllerRoute,
    RoutedBroker,
    cluster_allowed,
    on_the_controller,
)
from broker.request_context import RequestContext
from broker.security.access import Guarded
from broker.topic_placement import TopicError, validate_manual_assignment
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
_TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_PartitionResponse = _TopicResponse.ReassignablePartitionResponse


# What is read here of the broker (its BrokerContext is one), as Protocols.
class Reassigning(Protocol):
    """cluster/reassignment.py's Reassignments."""

    async def alter(self, name: str, partition: int, target: list[int] | None,
                    allow_replication_factor_change: bool = True) -> ReassignmentResult: ...


class ReassigningController(ControllerRole, Protocol):
    @property
    def reassignments(self) -> Reassigning: ...
    def require_active(self) -> None: ...


class ReassigningCluster(ControllerRoute, Protocol):
    @property
    def controller(self) -> ReassigningController: ...


class AssignedTopic(Protocol):
    @property
    def replicas(self) -> Mapping[int, list[int]]: ...


class TopicLookup(Protocol):
    def get(self, name: str) -> AssignedTopic | None: ...


class ReassigningBroker(Guarded, RoutedBroker, Protocol):
    @property
    def cluster(self) -> ReassigningCluster | None: ...
    @property
    def topics(self) -> TopicLookup: ...


@handles(API_KEY, "0-1")
async def alter_partition_reassignments(broker: ReassigningBroker, request: Request[AlterPartitionReassignmentsRequest],
                                        connection: RequestContext
                                        ) -> AlterPartitionReassignmentsResponse:
    body = request.body
    allow_change = body.allow_replication_factor_change if request.api_version >= 1 else True
    if not cluster_allowed(broker, request, connection, Operation.ALTER):
        return _refused(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")

    async def alter() -> AlterPartitionReassignmentsResponse:
        topics = []
        for topic in body.topics:
            results = []
            for p in topic.partitions:
                target = None if p.replicas is None else list(p.replicas)
                try:
                    result = await _alter(broker, topic.name, p.partition_index, target, allow_change)
                except StoreError as exc:  # this partition fails; those altered before keep their answer
                    result = ReassignmentResult(*store_error_answer(exc))
                results.append(_PartitionResponse(partition_index=p.partition_index, error_code=result.error_code,
                                                  error_message=result.message))
            topics.append(_TopicResponse(name=topic.name, partitions=results))
        return AlterPartitionReassignmentsResponse(throttle_time_ms=0, allow_replication_factor_change=allow_change,
                                                   error_code=ErrorCode.NONE, error_message=None, responses=topics)

    return await on_the_controller(broker, request, alter, lambda code, message: _refused(body, code, message))


async def _alter(broker: ReassigningBroker, name: str, partition: int, target: list[int] | None,
                 allow_change: bool) -> ReassignmentResult:
    cluster = broker.cluster
    if cluster is not None:
        cluster.controller.require_active()
        return await cluster.controller.reassignments.alter(name, partition, target, allow_change)
    topic = broker.topics.get(name)  # one broker: nothing can move, nothing is ever under way
    if topic is None or partition not in topic.replicas:
        return ReassignmentResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{partition}.")
    if target is None:
        return ReassignmentResult(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    try:
        validate_manual_assignment(target, None, [broker.node_id])
    except TopicError as exc:
        return ReassignmentResult(exc.error_code, exc.message)
    if not allow_change and len(target) != len(topic.replicas[partition]):
        return ReassignmentResult(ErrorCode.INVALID_REPLICATION_FACTOR, f"The replication factor is changed from "
                                  f"{len(topic.replicas[partition])} to {len(target)}")
    return ReassignmentResult()


def _refused(body: AlterPartitionReassignmentsRequest, code: ErrorCode, message: str
             ) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=code, error_message=message, responses=[
        _TopicResponse(name=t.name, partitions=[
            _PartitionResponse(partition_index=p.partition_index, error_code=code, error_message=message)
            for p in t.partitions]) for t in body.topics])
