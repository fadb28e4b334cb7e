"""DeleteGroups (key 42), versions 0-2.

Deletes Empty groups: tombstones for every committed offset and for the group metadata are written
to `__consumer_offsets`, then the group is gone (Dead). A group with members (or a member that got
MEMBER_ID_REQUIRED and may still rejoin) is NON_EMPTY_GROUP; an unknown group GROUP_ID_NOT_FOUND.
A group named twice is answered once. A deleted share group's share-partition state goes with it;
when the share coordinator cannot delete some of it the group's answer is that error (the group is
deleted all the same: the state left is a known gap, Kafka deletes the state first).

Errors: NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse

API_KEY = ApiKey.DELETE_GROUPS
_Result = DeleteGroupsResponse.DeletableGroupResult


@handles(API_KEY, "0-2")
async def delete_groups(broker: BrokerContext, request: Request[DeleteGroupsRequest],
                        connection: RequestContext) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(request.body.groups_names))
    permitted = [n for n in names if allowed(broker, connection, Operation.DELETE, ResourceType.GROUP, n)]
    shares = {n for n in permitted if n in broker.groups.share.groups}
    results = await broker.groups.delete_groups(permitted) if permitted else {}
    for name, error in results.items():
        if error == ErrorCode.NONE and name in shares:  # a share group's share-partition state goes with it
            failed = [e for e in (await broker.shares.forget(name, broker.topics.all())).values() if e]
            if failed:  # the group is gone but some state stays: not answered as done
                results[name] = failed[0]
    results.update({n: ErrorCode.GROUP_AUTHORIZATION_FAILED for n in names if n not in permitted})
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        _Result(group_id=name, error_code=results[name]) for name in names])
