"""ReadShareGroupState (key 84), version 0: a share-partition leader asks the share coordinator
(broker/share/coordinator.py) for a share-partition's stored state (broker to broker; Ebb's leaders
send it from broker/share/persister.py when the key's `__share_group_state` partition is led elsewhere).

CLUSTER_ACTION on the cluster is needed (Kafka's KafkaApis), else each partition answers
CLUSTER_AUTHORIZATION_FAILED. A partition whose state was never initialized (InitializeShareGroupState),
or was deleted since, is INVALID_REQUEST, as Kafka 4.3.1's share coordinator refuses it; one initialized
without a start offset answers StartOffset -1 and no batches under its state epoch; an error StartOffset 0, as
Kafka's. Before `__share_group_state` exists (nothing was ever stored) every key is NOT_COORDINATOR, as
on Kafka. A leader epoch older than the stored one is FENCED_LEADER_EPOCH; a newer one is stored before
the answer (Kafka runs the read as a write), fencing the older leader's later writes. A negative
partition is INVALID_REQUEST, a topic or partition that does not exist UNKNOWN_TOPIC_OR_PARTITION
(Kafka's checks, in that order: no state before the leader epoch, the topic last).

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, FENCED_LEADER_EPOCH, INVALID_REQUEST,
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.share_state_requests import answer_each, message_of
from broker.request_context import RequestContext
from broker.share.state_log import ShareState, StateKey
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ReadShareGroupStateRequest, ReadShareGroupStateResponse

_Result = ReadShareGroupStateResponse.ReadStateResult
_Partition = _Result.PartitionResult


def _partition(index: int, code: ErrorCode, state: ShareState | None = None) -> _Partition:
    return _Partition(
        partition=index, error_code=code, error_message=message_of(code),
        state_epoch=state.state_epoch if state is not None else 0,
        start_offset=state.start_offset if state is not None else -1 if code == ErrorCode.NONE else 0,
        state_batches=[_Partition.StateBatch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                       for f, la, s, c in (state.batches if state is not None else ())])


@handles(ApiKey.READ_SHARE_GROUP_STATE, "0")
async def read_share_group_state(broker: BrokerContext, request: Request[ReadShareGroupStateRequest],
                                 connection: RequestContext) -> ReadShareGroupStateResponse:
    async def answer(key: StateKey, asked) -> _Partition:
        return _partition(asked.partition, *await broker.share_coordinator.read(key, asked.leader_epoch))

    return ReadShareGroupStateResponse(results=await answer_each(
        broker, connection, request.body, _Result, answer, lambda asked, code: _partition(asked.partition, code)))
