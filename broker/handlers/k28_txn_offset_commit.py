"""TxnOffsetCommit (key 28), versions 0-5: a transactional producer commits a consumer group's offsets
inside its transaction (`sendOffsetsToTransaction`). v5 is transactions version 2 (KIP-890 part 2):
no AddOffsetsToTxn comes first, this group coordinator adds the group's `__consumer_offsets`
partition to the transaction itself (the transaction coordinator directly, or AddPartitionsToTxn v5
to it: broker/txn/verification.py), answering its refusal per partition (PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS and TRANSACTION_ABORTABLE as is) in the codes Kafka's
group coordinator answers (its normalizeException): the producer retries COORDINATOR_NOT_AVAILABLE
and NOT_COORDINATOR, where Produce's NOT_ENOUGH_REPLICAS or NOT_LEADER_OR_FOLLOWER would be fatal.

Before `__consumer_offsets` and `__transaction_state` exist (AddOffsetsToTxn and FindCoordinator
create them) COORDINATOR_NOT_AVAILABLE, as Kafka answers. The offsets partition of the group must
have been added to the transaction (AddOffsetsToTxn): the transaction coordinator is asked directly
when it is this broker (else INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH);
in a cluster whose transaction coordinator for the id is another broker it is not asked below v5
(the AddPartitionsToTxn v4 verification is Produce's only here; docs/features.md gaps). Where the
transaction is checked, the offsets partition's KIP-890 guard is taken first and presented at the
append, as Kafka's group coordinator does: a marker written in between (a transaction ended by a
client that did not wait for this answer) refuses the batch, INVALID_TXN_STATE at every version
(Kafka's group coordinator passes its log's refusal through; TRANSACTION_ABORTABLE at v4 is the
check's answer only), or INVALID_PRODUCER_EPOCH when the marker bumped the epoch, instead of
letting it open a transaction after its marker. The group rules are OffsetCommit's
(broker/group/offsets.py): v3+ members are checked by generation, member id and instance id. The
offset records go to `__consumer_offsets` as one transactional batch of the producer and stay pending:
they replace the group's committed offsets only when the COMMIT marker reaches that partition, and
vanish on ABORT (broker/group/offsets_store.py, also when replaying the topic).

Errors: NONE, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, INVALID_TXN_STATE
(TRANSACTION_ABORTABLE at v4), CONCURRENT_TRANSACTIONS (v5),
INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
"""

from __future__ import annotations

from broker.group import GroupError, OffsetCommit
from broker.group.offsets_store import OFFSETS_TOPIC
from broker.handlers import BrokerContext, handles
from broker.handlers.offset_commits import gather_commits
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse

API_KEY = ApiKey.TXN_OFFSET_COMMIT
_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Partition = _Topic.TxnOffsetCommitResponsePartition
# Kafka's group coordinator answers a failed write (the implicit add's too) in its own retriable codes.
_GROUP_ERROR = {ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
                ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR}


@handles(API_KEY, "0-5")
async def txn_offset_commit(broker: BrokerContext, request: Request[TxnOffsetCommitRequest],
                            connection: RequestContext) -> TxnOffsetCommitResponse:
    version, body = request.api_version, request.body
    txn_ok = allowed(broker, connection, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id)
    results, pending = gather_commits(
        broker, connection, body.group_id, body.topics,
        lambda index: _Partition(partition_index=index, error_code=ErrorCode.NONE), with_leader_epoch=version >= 2,
        refused=ErrorCode.NONE if txn_ok else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if pending:
        errors = await _commit(broker, body, version, [commit for _, commit in pending])
        for (result, _), error in zip(pending, errors, strict=True):
            result.error_code = error
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[_Topic(name=n, partitions=p) for n, p in results])


async def _commit(broker: BrokerContext, body: TxnOffsetCommitRequest, version: int,
                  commits: list[OffsetCommit]) -> list[ErrorCode]:
    store = broker.groups.store
    if not store.topic_exists() or not broker.transactions.coordinating:
        # Kafka's group coordinator cannot have the transaction verified yet: retriable
        return [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(commits)
    offsets_partition = (OFFSETS_TOPIC, store.partition_for(body.group_id))
    txns = broker.transactions
    # The guard is taken before the transaction is checked and presented at the append (Kafka's
    # scheduleTransactionalWriteOperation): a marker written in between drops it and the batch is
    # refused, rather than landing after the marker and opening a transaction nobody will end.
    guard: object | None = None
    if version >= 5:
        refused, guards = await txns.verifier.verify(
            body.transactional_id, body.producer_id, body.producer_epoch, [offsets_partition], add=True,
            abortable=True)
        verified = _GROUP_ERROR.get(code := refused.get(offsets_partition, ErrorCode.NONE), code)
        guard = guards.get(offsets_partition)
    else:
        taken = None
        if txns.verifies_here(body.transactional_id):
            not_taken, guards = await txns.verifier.take_guards(body.producer_id, body.producer_epoch,
                                                                [offsets_partition])
            taken = not_taken.get(offsets_partition, ErrorCode.NONE)
            guard = guards.get(offsets_partition)
        verified = txns.verify(body.transactional_id, body.producer_id, body.producer_epoch, offsets_partition)
        if verified == ErrorCode.INVALID_TXN_STATE and version == 4:  # its client knows the abortable error
            verified = ErrorCode.TRANSACTION_ABORTABLE
        if verified == ErrorCode.NONE and taken:
            verified = _GROUP_ERROR.get(taken, taken)
    if verified != ErrorCode.NONE:
        return [verified] * len(commits)
    try:
        return await broker.groups.offsets.commit(
            body.group_id, body.generation_id if version >= 3 else -1, body.member_id if version >= 3 else "",
            body.group_instance_id if version >= 3 else None, -1, commits, version,
            producer=(body.producer_id, body.producer_epoch), verification_guard=guard)
    except GroupError as exc:
        return [exc.error_code] * len(commits)
