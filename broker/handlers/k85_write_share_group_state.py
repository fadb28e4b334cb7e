"""WriteShareGroupState (key 85), versions 0-1: a share-partition leader stores a share-partition's
state with the share coordinator (broker/share/coordinator.py; broker to broker, sent by
broker/share/persister.py). Answered once the ShareSnapshot record is in `__share_group_state` at acks=-1.

CLUSTER_ACTION on the cluster is needed, else CLUSTER_AUTHORIZATION_FAILED per partition. A
share-partition without state (never initialized, or deleted) is INVALID_REQUEST, whatever the write
carries, checked before the epochs as Kafka 4.3.1's share coordinator does: only InitializeShareGroupState
makes a state. A leader epoch older than the highest stored is FENCED_LEADER_EPOCH, checked first and on
its own, then a state epoch older than the stored one FENCED_STATE_EPOCH (the state epoch stays the
initialization's); StartOffset -1 keeps the stored start offset (INVALID_REQUEST
when the stored state has none). As Kafka's shard, a negative partition is INVALID_REQUEST
and a topic or partition that does not exist UNKNOWN_TOPIC_OR_PARTITION; Ebb also refuses
(INVALID_REQUEST) a batch with first > last or a negative offset or count, or an unknown delivery state.
v1's DeliveryCompleteCount is not stored (Ebb counts it
from the batches when asked).

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, INVALID_REQUEST,
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.share_state_requests import answer_each, message_of
from broker.request_context import RequestContext
from broker.share.state_log import StateKey
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import WriteShareGroupStateRequest, WriteShareGroupStateResponse

_Result = WriteShareGroupStateResponse.WriteStateResult
_Partition = _Result.PartitionResult


def _partition(asked, code: ErrorCode) -> _Partition:
    return _Partition(partition=asked.partition, error_code=code, error_message=message_of(code))


@handles(ApiKey.WRITE_SHARE_GROUP_STATE, "0-1")
async def write_share_group_state(broker: BrokerContext, request: Request[WriteShareGroupStateRequest],
                                  connection: RequestContext) -> WriteShareGroupStateResponse:
    async def answer(key: StateKey, asked) -> _Partition:
        batches = tuple((b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                        for b in asked.state_batches)
        return _partition(asked, await broker.share_coordinator.write(
            key, asked.state_epoch, asked.leader_epoch, asked.start_offset, batches))

    return WriteShareGroupStateResponse(results=await answer_each(broker, connection, request.body, _Result,
                                                                  answer, _partition))
