"""FindCoordinator (key 10), versions 0-6; v4+ resolves a batch of keys (CoordinatorKeys).

Group keys (KeyType 0, and every v0 request): the coordinator of a group is the leader of the
group's `__consumer_offsets` partition (abs(java hashCode(group id)) % partitions): this broker when
it is alone.
The topic is created on the first lookup (internal, compacted, `offsets.topic.num.partitions`
partitions), so the answer names a coordinator that is ready; COORDINATOR_NOT_AVAILABLE if that
fails or the broker is stopping.

Transaction keys (KeyType 1): the leader of the id's `__transaction_state` partition (this broker
when it is alone); the topic is created on the first lookup, as `__consumer_offsets` is for groups.
DESCRIBE on the transactional id is needed (with an authorizer).

Share coordinator keys (KeyType 2, v6 only; INVALID_REQUEST before, as Kafka): "groupId:topicId:partition",
a share-partition's key; its coordinator is the leader of the key's `__share_group_state` partition
(broker/share/coordinator.py; created on the first lookup). CLUSTER_ACTION on the cluster is needed
(CLUSTER_AUTHORIZATION_FAILED): share-partition leaders ask, not clients. A key that does not parse is
INVALID_REQUEST. Unknown key types: INVALID_REQUEST. A failed lookup carries NodeId -1, Host "" and Port -1.

Errors: NONE, COORDINATOR_NOT_AVAILABLE, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.group import GroupError
from broker.group.offsets_store import OFFSETS_TOPIC
from broker.handlers import BrokerContext, handles
from broker.handlers.cluster_view import alive_brokers, endpoint_of, leader_of
from broker.request_context import RequestContext
from broker.security.access import allowed, allowed_on_cluster
from broker.share.state_log import SHARE_STATE_TOPIC, parse_coordinator_key
from broker.topics import TopicError
from broker.txn import TRANSACTION_STATE_TOPIC, TxnError
from protocol.enums import ApiKey, CoordinatorType, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse

API_KEY = ApiKey.FIND_COORDINATOR
_Coordinator = FindCoordinatorResponse.Coordinator


async def _lookup(broker: BrokerContext, key_type: int, key: str, listener_name: str,
                  may_describe: Callable[[str], bool], may_describe_txn: Callable[[str], bool],
                  share_lookup: Callable[[], ErrorCode | None]) -> _Coordinator:
    found = _Coordinator(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.NONE, error_message=None)
    if key_type == CoordinatorType.TRANSACTION:
        return await _transaction_coordinator(broker, found, listener_name, may_describe_txn)
    if key_type == CoordinatorType.SHARE:
        return await _share_coordinator(broker, found, listener_name, share_lookup())
    if key_type != CoordinatorType.GROUP:
        found.error_code = ErrorCode.INVALID_REQUEST
        found.error_message = f"unknown coordinator key type {key_type}"
        return found
    if not may_describe(key):
        found.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        found.error_message = "DESCRIBE on the group is needed"
        return found
    groups = broker.groups
    try:
        if groups is None or not groups.active:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not active")
        await groups.store.ensure_topic()
    except GroupError as exc:
        found.error_code, found.error_message = exc.error_code, exc.message
        return found
    coordinator = _coordinator_of(broker, key, listener_name)
    return _answered(found, coordinator, "the group's offsets partition has no leader now")


async def _transaction_coordinator(broker: BrokerContext, found: _Coordinator, listener_name: str,
                                   may_describe: Callable[[str], bool]) -> _Coordinator:
    if not may_describe(found.key):
        found.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        found.error_message = "DESCRIBE on the transactional id is needed"
        return found
    try:
        await broker.transactions.ensure_topic()
    except TxnError as exc:
        found.error_code, found.error_message = exc.error_code, exc.message
        return found
    coordinator = _leader_endpoint(broker, TRANSACTION_STATE_TOPIC,
                                   broker.transactions.partition_of(found.key), listener_name)
    return _answered(found, coordinator, "the transactional id's state partition has no leader now")


async def _share_coordinator(broker: BrokerContext, found: _Coordinator, listener_name: str,
                             refused: ErrorCode | None) -> _Coordinator:
    if refused is not None:
        found.error_code = refused
        found.error_message = ("share coordinator keys need FindCoordinator v6" if refused == ErrorCode.INVALID_REQUEST
                               else "CLUSTER_ACTION on the cluster is needed")
        return found
    try:
        key = parse_coordinator_key(found.key)
    except ValueError as exc:
        found.error_code, found.error_message = ErrorCode.INVALID_REQUEST, str(exc)
        return found
    try:
        await broker.share_coordinator.ensure_topic()
    except TopicError as exc:
        found.error_code, found.error_message = exc.error_code, exc.message
        return found
    coordinator = _leader_endpoint(broker, SHARE_STATE_TOPIC, broker.share_coordinator.partition_of(key),
                                   listener_name)
    return _answered(found, coordinator, "the key's share group state partition has no leader now")


def _answered(found: _Coordinator, coordinator, no_leader: str) -> _Coordinator:
    """`found` naming `coordinator`, or COORDINATOR_NOT_AVAILABLE (`no_leader`) when there is none now."""
    if coordinator is None:
        found.error_code, found.error_message = ErrorCode.COORDINATOR_NOT_AVAILABLE, no_leader
    else:
        found.node_id, found.host, found.port = coordinator.node_id, coordinator.host, coordinator.port
    return found


def _coordinator_of(broker: BrokerContext, group_id: str, listener_name: str):
    """The leader of the group's __consumer_offsets partition (this broker when it is alone)."""
    return _leader_endpoint(broker, OFFSETS_TOPIC, broker.groups.store.partition_for(group_id), listener_name)


def _leader_endpoint(broker: BrokerContext, topic_name: str, partition: int, listener_name: str):
    """Where the leader of a coordinator topic's partition listens (this broker when it is alone)."""
    if broker.cluster is None:
        mine = alive_brokers(broker, listener_name)
        return mine[0] if mine else None
    topic = broker.topics.get(topic_name)
    leader = leader_of(broker, topic, partition) if topic is not None else -1
    return endpoint_of(broker, leader, listener_name) if leader >= 0 else None


@handles(API_KEY, "0-6")
async def find_coordinator(broker: BrokerContext, request: Request[FindCoordinatorRequest],
                           connection: RequestContext) -> FindCoordinatorResponse:
    version, body = request.api_version, request.body
    key_type = body.key_type if version >= 1 else CoordinatorType.GROUP

    def may_describe(group_id: str) -> bool:
        return allowed(broker, connection, Operation.DESCRIBE, ResourceType.GROUP, group_id)

    def may_describe_txn(transactional_id: str) -> bool:
        return allowed(broker, connection, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)

    def share_lookup() -> ErrorCode | None:
        if version < 6:
            return ErrorCode.INVALID_REQUEST
        if not allowed_on_cluster(broker, connection, Operation.CLUSTER_ACTION):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return None

    if version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            await _lookup(broker, key_type, key, connection.listener_name, may_describe, may_describe_txn, share_lookup)
            for key in body.coordinator_keys])
    found = await _lookup(broker, key_type, body.key, connection.listener_name, may_describe, may_describe_txn,
                          share_lookup)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=found.error_code, error_message=found.error_message,
                                   node_id=found.node_id, host=found.host, port=found.port)
