"""ElectLeaders (key 43), versions 0-2 (KIP-183, KIP-460's ElectionType from v1; v0 is PREFERRED).

`kafka-leader-election` and Admin.electLeaders. The controller holds the elections
(broker/cluster/elections.py, Kafka's rules): PREFERRED moves leadership to the first replica of the
assignment when it is alive and in sync; UNCLEAN gives a partition without a leader the first alive
in-sync replica, or else any alive replica (acknowledged records it lacks are lost). Per partition:
NONE (elected), ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION. Null TopicPartitions asks for every partition; then, as in Kafka, every
topic is listed but partitions whose election was not needed are left out.

A broker that is not the controller forwards the request to it (handlers/controller_requests.py);
with no reachable controller every partition is NOT_CONTROLLER, which the admin client retries. On
one broker without ZooKeeper the broker leads every partition it can: preferred elections are not
needed, and a partition whose log is offline has no replica to elect.

Refusals of the whole request answer the top-level code (v1+) and the same code for every asked
partition, as Kafka's ElectLeadersRequest.getErrorResponse: ALTER on CLUSTER missing,
CLUSTER_AUTHORIZATION_FAILED; an unknown ElectionType, INVALID_REQUEST. The elections are written at
once; TimeoutMs bounds only a forward to the controller.

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST, NOT_CONTROLLER, and the per-partition
codes above.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.cluster.elections import ElectionResult, elect_leaders
from broker.cluster.partition_state import NO_LEADER, PartitionState
from broker.handlers import BrokerContext, handles
from broker.handlers.cluster_view import offline_logs
from broker.handlers.controller_requests import cluster_allowed, on_the_controller
from broker.log import TopicPartition
from broker.request_context import RequestContext
from protocol.enums import ApiKey, ElectionType, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ElectLeadersRequest, ElectLeadersResponse

API_KEY = ApiKey.ELECT_LEADERS
_TopicResult = ElectLeadersResponse.ReplicaElectionResult
_PartitionResult = _TopicResult.PartitionResult


@handles(API_KEY, "0-2")
async def elect_leaders_handler(broker: BrokerContext, request: Request[ElectLeadersRequest],
                                connection: RequestContext) -> ElectLeadersResponse:
    body, version = request.body, request.api_version
    if not cluster_allowed(broker, request, connection, Operation.ALTER):
        return _refused(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    try:
        election = ElectionType(body.election_type if version >= 1 else ElectionType.PREFERRED)
    except ValueError:
        return _refused(body, ErrorCode.INVALID_REQUEST, f"Unknown election type {body.election_type}")
    return await on_the_controller(broker, request, lambda: _elect(broker, body, election),
                                   lambda code, message: _refused(body, code, message))


async def _elect(broker: BrokerContext, body: ElectLeadersRequest, election: ElectionType) -> ElectLeadersResponse:
    named = body.topic_partitions
    every_partition = named is None
    asked = ([TopicPartition(t.name, p) for t in broker.topics.all() for p in sorted(t.replicas)] if named is None
             else [TopicPartition(t.topic, p) for t in named for p in t.partitions])
    cluster = broker.cluster
    results = await (cluster.controller.elect_leaders(election, asked) if cluster is not None
                     else _on_one_broker(broker, election, asked))
    by_topic: dict[str, list] = ({t.name: [] for t in broker.topics.all()} if named is None
                                 else {t.topic: [] for t in named})
    for tp in asked:
        result = results[tp]
        if every_partition and result.error_code == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        by_topic[tp.topic].append(_PartitionResult(partition_id=tp.partition, error_code=result.error_code,
                                                   error_message=result.message))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=[
        _TopicResult(topic=name, partition_result=partitions) for name, partitions in by_topic.items()])


async def _on_one_broker(broker: BrokerContext, election: ElectionType, asked: list[TopicPartition]
                         ) -> dict[TopicPartition, ElectionResult]:
    """Without a cluster this broker is every replica; it leads each partition whose log is online."""
    offline = offline_logs(broker)
    me = broker.node_id

    def assignment(tp: TopicPartition) -> list[int] | None:
        topic = broker.topics.get(tp.topic)
        return None if topic is None else topic.replicas.get(tp.partition)

    async def judge_only(name: str, index: int,
                         decide: Callable[[PartitionState], PartitionState | None]) -> bool:
        online = TopicPartition(name, index) not in offline  # no state to write: nothing can change
        decide(PartitionState(leader=me if online else NO_LEADER, leader_epoch=0, isr=(me,) if online else (),
                              controller_epoch=0))
        return False

    return await elect_leaders(election, asked, assignment, {me}, judge_only)


def _refused(body: ElectLeadersRequest, code: ErrorCode, message: str) -> ElectLeadersResponse:
    return ElectLeadersResponse(throttle_time_ms=0, error_code=code, replica_election_results=[
        _TopicResult(topic=t.topic, partition_result=[
            _PartitionResult(partition_id=p, error_code=code, error_message=message) for p in t.partitions])
        for t in body.topic_partitions or []])
