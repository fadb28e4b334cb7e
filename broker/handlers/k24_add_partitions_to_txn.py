"""AddPartitionsToTxn (key 24), versions 0-3: a transactional producer names the partitions it is
about to write in its transaction (versions 4-5 carry KIP-890's broker-to-coordinator checks, not
served: Produce asks the coordinator directly where the partition's leader is the id's coordinator,
and in a cluster other leaders take transactional batches unchecked; docs/features.md).

The transaction coordinator (broker/txn/coordinator.py) moves the transactional id to Ongoing with
the partitions added, written to `__transaction_state` before the answer. Every partition gets the
same answer, except that when some partitions cannot be added the others are OPERATION_NOT_ATTEMPTED
(Kafka's KafkaApis): unknown topics or partitions UNKNOWN_TOPIC_OR_PARTITION, topics without WRITE
(with an authorizer) TOPIC_AUTHORIZATION_FAILED.

Errors: NONE, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED, INVALID_REQUEST (empty transactional id),
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.security.access import allowed
from broker.txn import TxnError
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
_TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult


def _answer(codes: dict[tuple[str, int], ErrorCode]) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list[_PartitionResult]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(_PartitionResult(partition_index=index, partition_error_code=code))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=[
        _TopicResult(name=topic, results_by_partition=results) for topic, results in by_topic.items()])


@handles(API_KEY, "0-3")
async def add_partitions_to_txn(broker: BrokerContext,
                                request: Request[AddPartitionsToTxnRequest]) -> AddPartitionsToTxnResponse:
    body, version = request.body, request.api_version
    asked = [(topic.name, index) for topic in body.v3_and_below_topics for index in topic.partitions]
    transactional_id = body.v3_and_below_transactional_id

    def everywhere(code: ErrorCode) -> AddPartitionsToTxnResponse:
        return _answer(dict.fromkeys(asked, code))

    if not transactional_id:
        return everywhere(ErrorCode.INVALID_REQUEST)
    if not allowed(broker, request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return everywhere(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    refused: dict[tuple[str, int], ErrorCode] = {}
    for name, index in asked:
        topic = broker.topics.get(name)
        if not allowed(broker, request, Operation.WRITE, ResourceType.TOPIC, name):
            refused[(name, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None or index not in topic.replicas:
            refused[(name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return _answer({tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in asked})
    try:
        await broker.transactions.add_partitions(transactional_id, body.v3_and_below_producer_id,
                                                 body.v3_and_below_producer_epoch, set(asked))
    except TxnError as exc:
        code = exc.error_code
        if code == ErrorCode.PRODUCER_FENCED and version < 2:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return everywhere(code)
    return everywhere(ErrorCode.NONE)
