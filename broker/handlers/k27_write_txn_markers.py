"""WriteTxnMarkers (key 27), versions 1-2: a transaction coordinator asks this broker, the leader
of the partitions named, to write each transaction's COMMIT or ABORT marker there (broker to broker;
Ebb's coordinator sends it for the partitions led elsewhere, broker/txn/markers.py).

As Kafka's KafkaApis.handleWriteTxnMarkersRequest: ALTER or CLUSTER_ACTION on the cluster is needed,
else every partition answers CLUSTER_AUTHORIZATION_FAILED; a partition without a replica here is
UNKNOWN_TOPIC_OR_PARTITION; the others get the marker through ReplicaManager.append_records
(origin COORDINATOR, acks=-1) with the request's coordinator epoch, and the
append's error: NOT_LEADER_OR_FOLLOWER (the coordinator retries at the new leader),
INVALID_PRODUCER_EPOCH (an older epoch than the partition's producer has),
TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than the last marker's),
NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT. A v2 marker names the transaction version
(0-2 are written; another is UNSUPPORTED_VERSION); a transactions version 2 marker must carry an
epoch above the producer's on the partition (its end bumped it), or be the retry of one already
written (the same epoch, no transaction open), else INVALID_PRODUCER_EPOCH, as Kafka 4.3.1's
ProducerAppendInfo.

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, NOT_ENOUGH_REPLICAS,
NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.log import TopicPartition
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse

API_KEY = ApiKey.WRITE_TXN_MARKERS
KNOWN_TRANSACTION_VERSIONS = (0, 1, 2)
_Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
_TopicResult = _Result.WritableTxnMarkerTopicResult
_PartitionResult = _TopicResult.WritableTxnMarkerPartitionResult


def _answer(producer_id: int, codes: dict[tuple[str, int], ErrorCode]) -> _Result:
    by_topic: dict[str, list[_PartitionResult]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(_PartitionResult(partition_index=index, error_code=code))
    return _Result(producer_id=producer_id,
                   topics=[_TopicResult(name=t, partitions=ps) for t, ps in by_topic.items()])


@handles(API_KEY, "1-2")
async def write_txn_markers(broker: BrokerContext, request: Request[WriteTxnMarkersRequest], connection: RequestContext
                            ) -> WriteTxnMarkersResponse:
    markers = request.body.markers
    authorized = (allowed_on_cluster(broker, connection, Operation.ALTER)
                  or allowed_on_cluster(broker, connection, Operation.CLUSTER_ACTION))
    hosted = broker.replicas.partitions
    results = []
    for marker in markers:
        codes: dict[tuple[str, int], ErrorCode] = {}
        writable: list[tuple[str, int]] = []
        for topic in marker.topics:
            for index in topic.partition_indexes:
                tp = (topic.name, index)
                if tp in codes:  # named twice: one marker
                    continue
                if not authorized:
                    codes[tp] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                elif TopicPartition(topic.name, index) not in hosted:
                    codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif request.api_version >= 2 and marker.transaction_version not in KNOWN_TRANSACTION_VERSIONS:
                    codes[tp] = ErrorCode.UNSUPPORTED_VERSION
                else:
                    codes[tp] = ErrorCode.NONE
                    writable.append(tp)
        if writable:
            written = await broker.transactions.markers.write(
                marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch,
                writable, marker.transaction_version if request.api_version >= 2 else 0)
            codes.update(zip(writable, written, strict=True))
        results.append(_answer(marker.producer_id, codes))
    return WriteTxnMarkersResponse(markers=results)
