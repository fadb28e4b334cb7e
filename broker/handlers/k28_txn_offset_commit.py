"""TxnOffsetCommit (key 28), versions 0-5: a transactional producer commits a consumer group's offsets
inside its transaction (`sendOffsetsToTransaction`).

The transaction is verified as Produce's is, by the one verifier (broker/txn/verification.py), for
the group's `__consumer_offsets` partition, as Kafka 4.3.1's group coordinator does before its write:
below v5 with `transaction.partition.verification.enable` (else not at all), the id's transaction
coordinator (this broker's own, or another's with AddPartitionsToTxn v4) says whether the partition
was added to the producer's open transaction (AddOffsetsToTxn); at v5 (transactions version 2,
KIP-890 part 2) no AddOffsetsToTxn comes first and the coordinator is asked to add it (v5 of
AddPartitionsToTxn). Where the producer has a transaction open on the offsets partition already,
the coordinator is not asked, at any version. Either way the partition's KIP-890 guard is taken
first and presented at the append: a marker written in between (a transaction ended by a client that
did not wait for this answer) refuses the batch, INVALID_TXN_STATE at every version (Kafka's group
coordinator passes its log's refusal through), or INVALID_PRODUCER_EPOCH when the marker bumped the
epoch, instead of letting it open a transaction after its marker.

A refusal is answered in the group coordinator's codes: the coordinator's verdict (PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE as INVALID_TXN_STATE below v4; INVALID_PRODUCER_ID_MAPPING,
CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS as is; COORDINATOR_NOT_AVAILABLE
when no broker leads the id's `__transaction_state` partition), then the wording of the coordinator's
own errors (broker/group/offsets_store.py coordinator_error: a coordinator out of reach is
COORDINATOR_LOAD_IN_PROGRESS, a lost offsets partition NOT_COORDINATOR), which the producer retries
where Produce's NOT_ENOUGH_REPLICAS would be fatal to it. Before `__consumer_offsets` and
`__transaction_state` exist (AddOffsetsToTxn and FindCoordinator create them)
COORDINATOR_NOT_AVAILABLE, as Kafka answers.

The group rules are OffsetCommit's (broker/group/offsets.py): v3+ members are checked by generation,
member id and instance id. The offset records go to `__consumer_offsets` as one transactional batch
of the producer and stay pending: they replace the group's committed offsets only when the COMMIT
marker reaches that partition, and vanish on ABORT (broker/group/offsets_store.py, also when
replaying the topic).

Errors: NONE, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, INVALID_TXN_STATE
(TRANSACTION_ABORTABLE from v4), CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_ID_MAPPING,
INVALID_PRODUCER_EPOCH, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR.
"""

from __future__ import annotations

from broker.group import GroupError, OffsetCommit
from broker.group.offsets_store import OFFSETS_TOPIC, coordinator_error
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
    # Produce's verification, by the one verifier: the guard is taken before the coordinator is asked
    # and presented at the append (Kafka's scheduleTransactionalWriteOperation), so a marker written in
    # between refuses the batch rather than letting it open a transaction nobody will end.
    guard: object | None = None
    if txns.verifies(adds=version >= 5):
        refused, guards = await txns.verifier.verify(
            body.transactional_id, body.producer_id, body.producer_epoch, [offsets_partition], add=version >= 5,
            abortable=version >= 4)
        if offsets_partition in refused:
            return [coordinator_error(refused[offsets_partition])] * len(commits)
        guard = guards.get(offsets_partition)
    try:
        return await broker.groups.offsets.commit(
            body.group_id, body.generation_id if version >= 3 else -1, body.member_id if version >= 3 else "",
            body.group_instance_id if version >= 3 else None, -1, commits, version,
            producer=(body.producer_id, body.producer_epoch), verification_guard=guard)
    except GroupError as exc:
        return [exc.error_code] * len(commits)
