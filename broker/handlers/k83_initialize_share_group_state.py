"""InitializeShareGroupState (key 83), version 0: the share coordinator (broker/share/coordinator.py)
stores a share-partition's first state: the state epoch and start offset asked (-1: the leader picks
it from share.auto.offset.reset when it starts leading), leader epoch 0, nothing in flight, under the
next snapshot epoch, at acks=-1 before the answer. Broker to broker: a group coordinator (Ebb's, through
broker/share/persister.py, or Kafka's) sends it when a share group first subscribes a share-partition.

A state epoch older than the stored one (and not -1) is FENCED_STATE_EPOCH, but a deleted state, or one
without start offset and batches, fences nothing (the epoch asked is stored; the leader epoch fence stays,
broker/share/coordinator.py); a negative partition INVALID_REQUEST, as is a start offset below -1 (Ebb's:
Kafka stores it); a topic or partition that does not exist UNKNOWN_TOPIC_OR_PARTITION (Kafka's checks);
NOT_COORDINATOR before `__share_group_state` exists or for a key led elsewhere. CLUSTER_ACTION on the
cluster is needed, else CLUSTER_AUTHORIZATION_FAILED per partition.

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, FENCED_STATE_EPOCH, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.share_state_requests import answer_each, message_of
from broker.request_context import RequestContext
from broker.share.state_log import StateKey
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import InitializeShareGroupStateRequest, InitializeShareGroupStateResponse

_Result = InitializeShareGroupStateResponse.InitializeStateResult
_Partition = _Result.PartitionResult


def _partition(asked, code: ErrorCode) -> _Partition:
    return _Partition(partition=asked.partition, error_code=code, error_message=message_of(code))


@handles(ApiKey.INITIALIZE_SHARE_GROUP_STATE, "0")
async def initialize_share_group_state(broker: BrokerContext, request: Request[InitializeShareGroupStateRequest],
                                       connection: RequestContext) -> InitializeShareGroupStateResponse:
    async def answer(key: StateKey, asked) -> _Partition:
        return _partition(asked, await broker.share_coordinator.initialize(key, asked.state_epoch, asked.start_offset))

    return InitializeShareGroupStateResponse(results=await answer_each(
        broker, connection, request.body, _Result, answer, _partition, empty_topics_checked=False,
        inactive_first=True))
