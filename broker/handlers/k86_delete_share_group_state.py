"""DeleteShareGroupState (key 86), version 0: the share coordinator (broker/share/coordinator.py)
forgets share-partitions' states (broker to broker: DeleteShareGroupOffsets and DeleteGroups on the
group's coordinator send it through broker/share/persister.py for keys coordinated elsewhere). The
state is marked deleted under the next state epoch: no state to reads, writes and summaries (as after
Kafka's tombstone), its leader's later writes refused; a key without state is NONE, nothing written.

CLUSTER_ACTION on the cluster is needed, else CLUSTER_AUTHORIZATION_FAILED per partition.

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.handlers.share_state_requests import answer_each, message_of
from broker.request_context import RequestContext
from broker.share.state_log import StateKey
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DeleteShareGroupStateRequest, DeleteShareGroupStateResponse

_Result = DeleteShareGroupStateResponse.DeleteStateResult
_Partition = _Result.PartitionResult


def _partition(asked, code: ErrorCode) -> _Partition:
    return _Partition(partition=asked.partition, error_code=code, error_message=message_of(code))


@handles(ApiKey.DELETE_SHARE_GROUP_STATE, "0")
async def delete_share_group_state(broker: BrokerContext, request: Request[DeleteShareGroupStateRequest],
                                   connection: RequestContext) -> DeleteShareGroupStateResponse:
    async def answer(key: StateKey, asked) -> _Partition:
        return _partition(asked, await broker.share_coordinator.delete(key))

    return DeleteShareGroupStateResponse(results=await answer_each(broker, connection, request.body, _Result,
                                                                   answer, _partition, inactive_first=True))
