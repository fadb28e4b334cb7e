"""AddPartitionsToTxn (key 24), versions 0-5. Versions 0-3 come from transactional producers,
naming the partitions they are about to write in their transaction; versions 4-5 (KIP-890 part 1)
from brokers: a batch of transactions, each either added or, with VerifyOnly, only checked (a
partition leader asking whether a producer's batch may open a transaction there:
broker/txn/verification.py).

The transaction coordinator (broker/txn/coordinator.py) moves the transactional id to Ongoing with
the partitions added, written to `__transaction_state` before the answer. Every partition of a
transaction gets the same answer, except that when some partitions cannot be added the others are
OPERATION_NOT_ATTEMPTED (Kafka's KafkaApis): unknown topics or partitions UNKNOWN_TOPIC_OR_PARTITION,
topics without WRITE (with an authorizer, v0-3 only) TOPIC_AUTHORIZATION_FAILED. A verify-only
transaction is answered per partition: NONE when in the producer's open transaction,
TRANSACTION_ABORTABLE when not (the asking leader maps it for its producer). A v4+ transaction that
is not verify-only is a leader adding a partition for a producer on transactions version 2 (Produce
v12, TxnOffsetCommit v5), recorded as such (ClientTransactionVersion 2), as Kafka's
TransactionVersion.transactionVersionForAddPartitionsToTxn.

Versions 4-5 need CLUSTER_ACTION on the cluster (with an authorizer): else the whole request is
CLUSTER_AUTHORIZATION_FAILED (the top-level error); WRITE on the ids and topics is not asked.

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED, INVALID_REQUEST
(empty transactional id), INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
before v2), CONCURRENT_TRANSACTIONS, TRANSACTION_ABORTABLE, NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed, allowed_on_cluster
from broker.txn import TxnError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
_TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
_TopicResultV3 = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult  # the same struct, typed per place
TopicPartitionKey = tuple[str, int]


def _by_topic(codes: dict[TopicPartitionKey, ErrorCode], topic_result) -> list:
    by_topic: dict[str, list] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(topic_result.AddPartitionsToTxnPartitionResult(
            partition_index=index, partition_error_code=code))
    return [topic_result(name=topic, results_by_partition=results) for topic, results in by_topic.items()]


@handles(API_KEY, "0-5")
async def add_partitions_to_txn(broker: BrokerContext,
                                request: Request[AddPartitionsToTxnRequest],
                                connection: RequestContext) -> AddPartitionsToTxnResponse:
    body, version = request.body, request.api_version
    if version < 4:
        codes = await _transaction(broker, request, connection, body.v3_and_below_transactional_id,
                                   body.v3_and_below_producer_id, body.v3_and_below_producer_epoch, False,
                                   body.v3_and_below_topics)
        return AddPartitionsToTxnResponse(throttle_time_ms=0,
                                          results_by_topic_v3_and_below=_by_topic(codes, _TopicResultV3))
    if not allowed_on_cluster(broker, connection, Operation.CLUSTER_ACTION):  # only brokers send these
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    results = []
    for txn in body.transactions:
        codes = await _transaction(broker, request, connection, txn.transactional_id, txn.producer_id,
                                   txn.producer_epoch, txn.verify_only, txn.topics)
        results.append(_TxnResult(transactional_id=txn.transactional_id,
                                  topic_results=_by_topic(codes, _TxnResult.AddPartitionsToTxnTopicResult)))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_transaction=results)


async def _transaction(broker: BrokerContext, request: Request[AddPartitionsToTxnRequest], connection: RequestContext,
                       transactional_id: str,
                       producer_id: int, producer_epoch: int, verify_only: bool,
                       topics: list) -> dict[TopicPartitionKey, ErrorCode]:
    """One transaction's answer, per partition (Kafka's KafkaApis.handleAddPartitionsToTxnRequest)."""
    version = request.api_version
    asked = [(topic.name, index) for topic in topics for index in topic.partitions]
    if version < 4:
        if not transactional_id:
            return dict.fromkeys(asked, ErrorCode.INVALID_REQUEST)
        if not allowed(broker, connection, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return dict.fromkeys(asked, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    refused: dict[TopicPartitionKey, ErrorCode] = {}
    for name, index in asked:
        topic = broker.topics.get(name)
        if version < 4 and not allowed(broker, connection, Operation.WRITE, ResourceType.TOPIC, name):
            refused[(name, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None or index not in topic.replicas:
            refused[(name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in asked}
    if verify_only:
        return broker.transactions.verify_partitions(transactional_id, producer_id, producer_epoch, asked)
    if not transactional_id:
        return dict.fromkeys(asked, ErrorCode.INVALID_REQUEST)
    try:
        await broker.transactions.add_partitions(transactional_id, producer_id, producer_epoch, set(asked),
                                                 client_version=2 if version >= 4 else 0)
    except TxnError as exc:
        code = exc.error_code
        if code == ErrorCode.PRODUCER_FENCED and version < 2:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return dict.fromkeys(asked, code)
    return dict.fromkeys(asked, ErrorCode.NONE)
