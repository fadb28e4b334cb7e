"""Produce (key 0), versions 3-11; ApiVersions advertises 0-11.

Kafka 4.x advertises Produce from v0 although it refuses v0-2, because librdkafka's compression
check needs the advertised range to overlap v0 (KAFKA-18659); we do the same. A v0-2 request never
reaches this handler: the server closes the connection, as for any version outside 3-11.

Per partition, in Kafka's order (KafkaApis.handleProduceRequest, ReplicaManager.appendRecords,
UnifiedLog.append):
- the topic or partition is unknown: UNKNOWN_TOPIC_OR_PARTITION (Produce never creates topics;
  clients create them through Metadata or CreateTopics);
- the records are not exactly one complete magic-2 batch: INVALID_RECORD (ProduceRequest
  .validateRecords for v3+: legacy magic 0/1 message sets are INVALID_RECORD, not
  UNSUPPORTED_FOR_MESSAGE_FORMAT); zstd before v7: UNSUPPORTED_COMPRESSION_TYPE;
- acks other than 0, 1 or -1: INVALID_REQUIRED_ACKS;
- an internal topic (`__consumer_offsets`, ...) written by a client: INVALID_TOPIC_EXCEPTION;
- a control batch from a client: INVALID_RECORD; a transactional batch, or any request with a
  transactional id: transactions are not supported (INVALID_TXN_STATE for the batch,
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a transactional id, as from InitProducerId);
- batch larger than the topic's max.message.bytes: MESSAGE_TOO_LARGE; bad CRC or counts:
  CORRUPT_MESSAGE / INVALID_RECORD;
- idempotent producers: a retried batch is answered with its original offsets and NONE;
  OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH (see broker/replica/producer_state.py);
- an I/O failure: KAFKA_STORAGE_ERROR for that partition only.

LogAppendTime topics get the broker's time stamped into the batch and returned in
LogAppendTimeMs. LogStartOffset (v5+) is the partition's log start offset after the append.
acks=0: the records are appended and no response is sent; on an error the connection is closed, as
Kafka does, so the client refreshes its metadata. acks=-1 waits in
the produce purgatory until the high watermark covers the batch (at once on one broker);
REQUEST_TIMED_OUT after TimeoutMs. Records stay raw bytes: only batch headers are read here.

Errors: NONE, TOPIC_AUTHORIZATION_FAILED (with an authorizer: WRITE on the topic),
UNKNOWN_TOPIC_OR_PARTITION, INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE, INVALID_REQUIRED_ACKS,
INVALID_TOPIC_EXCEPTION, INVALID_TXN_STATE,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, CORRUPT_MESSAGE,
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR,
REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import structlog

from broker.handlers import CloseConnection, handles
from broker.handlers.context import BrokerContext
from broker.log import LogError
from broker.replica import Partition, PartitionError
from broker.security.access import allowed
from broker.security.acls import Operation, ResourceType
from protocol import fastpath
from protocol.compression import Compression
from protocol.errors import ErrorCode, ProtocolError
from protocol.framing import Request
from protocol.messages import ProduceRequest, ProduceResponse
from protocol.records import RecordBatch
from protocol.wire import I32

log = structlog.get_logger("produce")

API_KEY = 0
ADMIN_CLIENT_ID = "__admin_client"  # Kafka lets only this client id write internal topics
_TopicResponse = ProduceResponse.TopicProduceResponse
_PartitionResponse = _TopicResponse.PartitionProduceResponse
_RecordError = _PartitionResponse.BatchIndexAndErrorMessage
_HEADER_UP_TO_MAGIC = 17
_MIN_BATCH_LENGTH = 49
_CODEC_MASK = 0x07
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


class _Rejected(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _one_batch(records, version: int) -> tuple[memoryview, RecordBatch]:
    """ProduceRequest.validateRecords for v3+: exactly one complete magic-2 batch. Returns that
    batch's bytes (a partial tail shorter than a header is dropped, as Kafka trims it)."""
    if records is None or len(records) < _HEADER_UP_TO_MAGIC:
        raise _Rejected(ErrorCode.INVALID_RECORD,
                        f"Produce requests with version {version} must have at least one record batch per partition")
    records = memoryview(records)
    size = I32.unpack_from(records, 8)[0] + 12
    if size > len(records):
        raise _Rejected(ErrorCode.INVALID_RECORD,
                        f"Produce requests with version {version} must have at least one record batch per partition")
    if records[16] != 2:
        raise _Rejected(ErrorCode.INVALID_RECORD,
                        f"Produce requests with version {version} are only allowed to contain record batches "
                        f"with magic version 2 (got magic {records[16]})")
    try:
        batch = RecordBatch(records[:size])
    except ProtocolError as exc:
        raise _Rejected(exc.error_code, exc.message) from None
    attributes = batch.attributes
    codec = attributes & _CODEC_MASK
    if codec == Compression.ZSTD and version < 7:
        raise _Rejected(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                        f"Produce requests with version {version} are not allowed to use ZStandard compression")
    rest = records[size:]
    if len(rest) >= _HEADER_UP_TO_MAGIC:
        next_length = I32.unpack_from(rest, 8)[0]
        if next_length < _MIN_BATCH_LENGTH:
            raise _Rejected(ErrorCode.CORRUPT_MESSAGE, f"record batch after the first has length {next_length}")
        if next_length + 12 <= len(rest):
            raise _Rejected(ErrorCode.INVALID_RECORD,
                            f"Produce requests with version {version} are only allowed to contain exactly one "
                            "record batch per partition")
    if attributes & _CONTROL:
        raise _Rejected(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
    if attributes & _TRANSACTIONAL:
        raise _Rejected(ErrorCode.INVALID_TXN_STATE, "transactions are not supported by this broker")
    return records[:size], batch


def _check_min_insync(partition) -> None:
    """Kafka's Partition.appendRecordsToLeader: acks=-1 needs min.insync.replicas in the ISR."""
    partition.check_leader()
    wanted = partition.log.config.min_insync_replicas
    if len(partition.isr) < wanted:
        raise _Rejected(ErrorCode.NOT_ENOUGH_REPLICAS,
                        f"The in-sync replicas of {partition.topic_partition} ({len(partition.isr)}) are fewer than "
                        f"min.insync.replicas ({wanted})")


# Errors Kafka answers without the partition's log start offset (ReplicaManager.appendToLocalLog's
# "unknown append info" cases, and the per-partition checks made before the log is touched); every
# other append error (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS, ...)
# carries it.
_WITHOUT_START_OFFSET = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.INVALID_RECORD, ErrorCode.INVALID_REQUIRED_ACKS, ErrorCode.INVALID_TOPIC_EXCEPTION,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
})


def _error(index: int, code: ErrorCode, message: str | None, partition: Partition | None = None
           ) -> _PartitionResponse:
    start = partition.log_start_offset if partition is not None and code not in _WITHOUT_START_OFFSET else -1
    return _PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                              log_start_offset=start, error_message=message)


@handles(API_KEY, "3-11", advertised_min=0, decode=fastpath.decode_produce_request,
         encode=fastpath.encode_produce_response)
async def produce(broker: BrokerContext, request: Request[ProduceRequest]) -> ProduceResponse | None:
    body = request.body
    version = request.api_version
    acks = body.acks
    replicas = broker.replicas
    client_id = request.header.client_id
    internal_allowed = client_id == ADMIN_CLIENT_ID
    topics = []
    waiting: list[tuple[object, object, int]] = []  # (partition, response, offset the HW must pass)
    transactional = body.transactional_id is not None
    for topic_data in body.topic_data:
        results: list[_PartitionResponse] = []
        topics.append(_TopicResponse(name=topic_data.name, partition_responses=results))
        topic = broker.topics.get(topic_data.name)
        may_write = allowed(broker, request, Operation.WRITE, ResourceType.TOPIC, topic_data.name)
        for data in topic_data.partition_data:
            index = data.index
            if transactional:
                results.append(_error(index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                      "transactions are not supported by this broker"))
                continue
            if not may_write:  # before existence, as Kafka checks it
                results.append(_error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      "WRITE on the topic is needed to produce to it."))
                continue
            if topic is None or index not in topic.replicas:
                results.append(_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      "This server does not host this topic-partition."))
                continue
            partition = None
            try:
                records, batch = _one_batch(data.records, version)
                if acks not in (0, 1, -1):
                    raise _Rejected(ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, not {acks}")
                if topic.internal and not internal_allowed:
                    raise _Rejected(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                    f"Cannot append to internal topic {topic.name}")
                partition = replicas.partition(topic.name, index)
                if acks == -1:
                    _check_min_insync(partition)
                result = await partition.append_records_as_leader(records, batch)
            except _Rejected as exc:
                log.info("produce rejected", partition=f"{topic.name}-{index}", client_id=client_id,
                         error=ErrorCode(exc.error_code).name, reason=exc.message)
                results.append(_error(index, exc.error_code, exc.message, partition))
                continue
            except (PartitionError, LogError) as exc:
                results.append(_error(index, exc.error_code, exc.message, partition))
                for batch_index, message in getattr(exc, "record_errors", ()):  # keyless records (compacted)
                    results[-1].record_errors.append(_RecordError(batch_index=batch_index,
                                                                  batch_index_error_message=message))
                continue
            if not result.duplicate:
                replicas.counters.produced(topic.name, len(records), result.last_offset - result.base_offset + 1)
            response = _PartitionResponse(index=index, error_code=ErrorCode.NONE, base_offset=result.base_offset,
                                          log_append_time_ms=result.log_append_time,
                                          log_start_offset=result.log_start_offset)
            results.append(response)
            if acks == -1:
                waiting.append((partition, response, result.last_offset + 1))
    if acks == 0:
        errors = [f"{t.name}-{r.index}: {ErrorCode(r.error_code).name}" for t in topics
                  for r in t.partition_responses if r.error_code]
        if errors:
            # No response can carry the error, so Kafka closes the connection: the client reconnects
            # and refreshes its metadata.
            raise CloseConnection(f"acks=0 produce failed ({', '.join(errors)})")
        return None
    if waiting:
        await _await_replication(replicas, waiting, body.timeout_ms)
    return ProduceResponse(responses=topics, throttle_time_ms=0)


async def _await_replication(replicas, waiting, timeout_ms: int) -> None:
    """acks=-1: wait until each partition's high watermark covers its batch (Kafka's DelayedProduce)."""

    def replicated() -> bool:
        return all(p.high_watermark >= needed or not p.is_leader for p, _, needed in waiting)

    # The keys are read only if the request has to wait (on one broker it never does).
    await replicas.produces.wait((p.topic_partition for p, _, _ in waiting), replicated, timeout_ms)
    for partition, response, needed in waiting:
        if partition.high_watermark < needed:
            if partition.is_leader:
                response.error_code = ErrorCode.REQUEST_TIMED_OUT
                response.error_message = "the batch was not replicated to the in-sync replicas in time"
            else:  # leadership moved while the batch waited: it may or may not survive on the new leader
                response.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                response.error_message = "leadership moved before the batch was replicated"
        elif len(partition.isr) < partition.log.config.min_insync_replicas:
            # Written and replicated to the ISR, but the ISR shrank below the minimum meanwhile.
            response.error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            response.error_message = "the in-sync replicas fell below min.insync.replicas after the append"
