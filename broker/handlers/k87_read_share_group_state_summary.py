"""ReadShareGroupStateSummary (key 87), versions 0-1: the share coordinator (broker/share/coordinator.py)
tells a share-partition's state epoch, leader epoch and start offset, and from v1 KIP-1226's
DeliveryCompleteCount (the offsets at or past the start offset acknowledged or archived, counted from
the stored batches; -1 without a start offset), without its batches. Broker to broker: the group
coordinator asks it for DescribeShareGroupOffsets of partitions led elsewhere (Ebb's through
broker/share/persister.py, as Kafka's).

Unlike ReadShareGroupState it writes nothing and fences nothing: the leader epoch asked is not read.
A key without state answers start offset -1, state and leader epochs 0 and count -1 (a state deleted
by the admin APIs answers start offset -1 under its state epoch). A negative partition is
INVALID_REQUEST, a topic or partition that does not exist UNKNOWN_TOPIC_OR_PARTITION (Kafka's checks);
NOT_COORDINATOR before `__share_group_state` exists or for a key led elsewhere. CLUSTER_ACTION on the
cluster is needed, else CLUSTER_AUTHORIZATION_FAILED per partition.

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.share_state_requests import answer_each, message_of
from broker.request_context import RequestContext
from broker.share.state_log import ShareState, StateKey, delivery_complete_count
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse

_Result = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult
_Partition = _Result.PartitionResult


def _partition(index: int, code: ErrorCode, state: ShareState | None = None) -> _Partition:
    if state is None:  # no state, or an error: Kafka's toResponseData / toErrorResponseData defaults
        return _Partition(partition=index, error_code=code, error_message=message_of(code), state_epoch=0,
                          leader_epoch=0, start_offset=-1 if code == ErrorCode.NONE else 0,
                          delivery_complete_count=-1)
    return _Partition(partition=index, error_code=code, error_message=None, state_epoch=state.state_epoch,
                      leader_epoch=state.leader_epoch, start_offset=state.start_offset,
                      delivery_complete_count=delivery_complete_count(state))


@handles(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, "0-1")
async def read_share_group_state_summary(broker: BrokerContext, request: Request[ReadShareGroupStateSummaryRequest],
                                         connection: RequestContext) -> ReadShareGroupStateSummaryResponse:
    async def answer(key: StateKey, asked) -> _Partition:
        return _partition(asked.partition, *broker.share_coordinator.summary(key))

    return ReadShareGroupStateSummaryResponse(results=await answer_each(
        broker, connection, request.body, _Result, answer, lambda asked, code: _partition(asked.partition, code),
        inactive_first=True))
