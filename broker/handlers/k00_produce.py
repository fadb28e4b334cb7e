"""Produce (key 0), versions 3-12; ApiVersions advertises 0-12.

v12 is transactions version 2 (KIP-890 part 2): a transactional batch to a partition not yet in the
producer's transaction makes this leader add it (the coordinator directly, or AddPartitionsToTxn v5
to it: broker/txn/verification.py), whatever `transaction.partition.verification.enable` says, as
Kafka's ReplicaManager; CONCURRENT_TRANSACTIONS is then answered as is.

Kafka 4.x advertises Produce from v0 although it refuses v0-2, because librdkafka's compression
check needs the advertised range to overlap v0 (KAFKA-18659); we do the same. A v0-2 request never
reaches this handler: the server closes the connection, as for any version outside 3-11.

Refused whole (every partition it names answered the error, nothing verified or written; acks=0:
the connection closes), as Kafka refuses it:
- a partition's first batch is transactional and the request has no transactional id, or (with an
  authorizer) no WRITE on it: TRANSACTIONAL_ID_AUTHORIZATION_FAILED (KafkaApis, before anything else);
- transactional batches of more than one producer (two ids, or one id at two epochs) among those
  that pass the partition checks below: INVALID_PRODUCER_ID_MAPPING (ReplicaManager).

Per partition, in Kafka's order (KafkaApis.handleProduceRequest, ReplicaManager.appendRecords,
UnifiedLog.append):
- the topic or partition is unknown: UNKNOWN_TOPIC_OR_PARTITION (Produce never creates topics;
  clients create them through Metadata or CreateTopics);
- the records are not exactly one complete magic-2 batch: INVALID_RECORD (ProduceRequest
  .validateRecords for v3+: legacy magic 0/1 message sets are INVALID_RECORD, not
  UNSUPPORTED_FOR_MESSAGE_FORMAT); zstd before v7: UNSUPPORTED_COMPRESSION_TYPE;
- acks other than 0, 1 or -1: INVALID_REQUIRED_ACKS;
- an internal topic (`__consumer_offsets`, ...) written by a client: INVALID_TOPIC_EXCEPTION;
- a control batch from a client: INVALID_RECORD. With verification on (and always at v12) a
  transactional batch whose producer has no transaction open on its partition yet is verified with
  the id's coordinator, this broker's own or another's, by one rule (KIP-890,
  broker/txn/verification.py: AddPartitionsToTxn v4 verify-only, v5 adding at v12): not in the
  producer's open transaction, INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v11, whose clients know
  it, as Kafka's genericError); INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH; NOT_ENOUGH_REPLICAS
  when no coordinator can answer (none yet, loading, unreachable). A batch of a transaction open on
  its partition already is not verified, as in Kafka. Either way the partition's KIP-890 guard is
  taken before the check and presented at the append (OPEN_TRANSACTION_ONLY where the transaction is
  open there already, Kafka's sentinel): a marker written in between refuses the batch,
  INVALID_TXN_STATE at every version as Kafka's log answers it (INVALID_PRODUCER_EPOCH when the
  marker bumped the epoch);
- not led here: NOT_LEADER_OR_FOLLOWER; acks=-1 with fewer in-sync replicas than
  min.insync.replicas: NOT_ENOUGH_REPLICAS;
- batch larger than the topic's max.message.bytes: MESSAGE_TOO_LARGE; bad CRC or counts:
  CORRUPT_MESSAGE / INVALID_RECORD; a CreateTime record outside message.timestamp.after/before.max.ms
  of the leader's clock: INVALID_TIMESTAMP with record errors (broker/log/validator.py, which also
  recompresses to the topic's compression.type);
- idempotent producers: a retried batch is answered with its original offsets and NONE;
  OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH (see broker/replica/producer_state.py);
- an I/O failure: KAFKA_STORAGE_ERROR for that partition only.

LogAppendTime topics get the broker's time stamped into the batch and returned in
LogAppendTimeMs. LogStartOffset (v5+) is the partition's log start offset after the append.
acks=0: the records are appended and no response is sent; on an error the connection is closed, as
Kafka does, so the client refreshes its metadata. This handler checks what Kafka's KafkaApis checks
(authorization, the topic, the batch's shape); from the acks check on, the append and the acks=-1
wait belong to the replica manager (ReplicaManager.append_records, which the group coordinator's
writes share): acks=-1 waits in the produce purgatory until the high watermark covers the batch (at
once on one broker); REQUEST_TIMED_OUT after TimeoutMs, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR
fell below min.insync.replicas meanwhile. Records stay raw bytes: only batch headers are read here.

Errors: NONE, TOPIC_AUTHORIZATION_FAILED (with an authorizer: WRITE on the topic),
UNKNOWN_TOPIC_OR_PARTITION, INVALID_RECORD, INVALID_TIMESTAMP, UNSUPPORTED_COMPRESSION_TYPE, INVALID_REQUIRED_ACKS,
INVALID_TOPIC_EXCEPTION, INVALID_TXN_STATE, TRANSACTION_ABORTABLE, CONCURRENT_TRANSACTIONS (v12),
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, CORRUPT_MESSAGE,
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
NOT_ENOUGH_REPLICAS_AFTER_APPEND, KAFKA_STORAGE_ERROR, REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import structlog

from broker.handlers import CloseConnection, handles
from broker.handlers.context import BrokerContext
from broker.quotas.manager import throttle_for
from broker.replica import AppendOrigin
from broker.replica.outcomes import AppendEntry
from broker.request_context import RequestContext
from broker.security.access import allowed
from protocol import fastpath
from protocol.batch_header import ATTRIBUTES_AT
from protocol.compression import Compression
from protocol.enums import ApiKey, Operation, ResourceType
from protocol.errors import CodedError, ErrorCode, ProtocolError
from protocol.framing import Request
from protocol.messages import ProduceRequest, ProduceResponse
from protocol.records import (
    BATCH_FRAMING,
    BATCH_HEADER_SIZE,
    CODEC_MASK,
    CONTROL_BIT,
    FRAMING_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TRANSACTIONAL_BIT,
    RecordBatch,
)
from protocol.wire import I16

log = structlog.get_logger("produce")

API_KEY = ApiKey.PRODUCE
ADMIN_CLIENT_ID = "__admin_client"  # Kafka lets only this client id write internal topics
_TopicResponse = ProduceResponse.TopicProduceResponse
_PartitionResponse = _TopicResponse.PartitionProduceResponse
_RecordError = _PartitionResponse.BatchIndexAndErrorMessage


_TWO_PRODUCERS = "the transactional batches of one request must all be of one producer id and epoch"
_NO_TXN_ID = "transactional batches need the request's transactional id"
_NO_TXN_WRITE = "WRITE on the transactional id is needed to produce transactional batches"


class _Rejected(CodedError):
    """A partition's batch refused before the log is touched."""


def _one_batch(records, version: int) -> tuple[memoryview, RecordBatch]:
    """ProduceRequest.validateRecords for v3+: exactly one complete magic-2 batch. Returns that
    batch's bytes (a partial tail shorter than a header is dropped, as Kafka trims it)."""
    if records is None or len(records) < FRAMING_SIZE:
        raise _Rejected(ErrorCode.INVALID_RECORD,
                        f"Produce requests with version {version} must have at least one record batch per partition")
    records = memoryview(records)
    batch_length, magic = BATCH_FRAMING.unpack_from(records)
    size = batch_length + LOG_OVERHEAD
    if size > len(records):
        raise _Rejected(ErrorCode.INVALID_RECORD,
                        f"Produce requests with version {version} must have at least one record batch per partition")
    if magic != MAGIC:
        raise _Rejected(ErrorCode.INVALID_RECORD,
                        f"Produce requests with version {version} are only allowed to contain record batches "
                        f"with magic version 2 (got magic {magic})")
    try:
        batch = RecordBatch(records[:size])
    except ProtocolError as exc:
        raise _Rejected(exc.error_code, exc.message) from None
    attributes = batch.attributes
    codec = attributes & CODEC_MASK
    if codec == Compression.ZSTD and version < 7:
        raise _Rejected(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                        f"Produce requests with version {version} are not allowed to use ZStandard compression")
    rest = records[size:]
    if len(rest) >= FRAMING_SIZE:
        next_length, _ = BATCH_FRAMING.unpack_from(rest)
        if next_length + LOG_OVERHEAD < BATCH_HEADER_SIZE:
            raise _Rejected(ErrorCode.CORRUPT_MESSAGE, f"record batch after the first has length {next_length}")
        if next_length + LOG_OVERHEAD <= len(rest):
            raise _Rejected(ErrorCode.INVALID_RECORD,
                            f"Produce requests with version {version} are only allowed to contain exactly one "
                            "record batch per partition")
    return records[:size], batch


async def _verify(broker: BrokerContext, transactional_id: str, producer: tuple[int, int], verified: list[int],
                  entries: list[AppendEntry], slots: list[tuple[list, int, int]], version: int,
                  client_id: str | None):
    """KIP-890 for the transactional batches at `verified` in `entries`, all of `producer` (id, epoch):
    broker/txn/verification.py takes each partition's guard and asks the id's coordinator (this
    broker's own, or another's) about the partitions where the producer has no transaction open yet;
    a batch of a transaction open on its partition is not asked about and presents
    OPEN_TRANSACTION_ONLY, so that a marker written meanwhile refuses it. The batches refused get
    their answer here and leave `entries`; returns (entries, slots, guards)."""
    sequences: dict[tuple[str, int], int] = {}
    for position in verified:
        name, index, _, batch = entries[position]
        sequences[(name, index)] = batch.base_sequence
    errors, guards = await broker.transactions.verifier.verify(
        transactional_id, *producer, list(sequences), add=version >= 12, abortable=version == 11, sequences=sequences)
    if not errors:
        return entries, slots, guards
    kept_entries, kept_slots = [], []
    for entry, slot in zip(entries, slots, strict=True):
        code = errors.get((entry[0], entry[1]))
        if code is None:
            kept_entries.append(entry)
            kept_slots.append(slot)
            continue
        results, position, index = slot
        message = (f"Partition {entry[0]}-{index} was not added to the transaction"
                   if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE)
                   else f"Unable to verify the partition has been added to the transaction ({code.name})")
        log.info("produce rejected", partition=f"{entry[0]}-{index}", client_id=client_id, error=code.name,
                 reason=message)
        results[position] = _error(index, code, message)
    return kept_entries, kept_slots, guards


def _first_batch_transactional(records) -> bool:
    """Whether a partition's records open with a complete transactional batch: what Kafka's
    RequestUtils.hasTransactionalRecords looks at (only headers are read)."""
    if records is None or len(records) < BATCH_HEADER_SIZE:
        return False
    batch_length, magic = BATCH_FRAMING.unpack_from(records)
    if magic != MAGIC or batch_length + LOG_OVERHEAD > len(records):
        return False
    return bool(I16.unpack_from(records, ATTRIBUTES_AT)[0] & TRANSACTIONAL_BIT)


def _refused_whole(body: ProduceRequest, code: ErrorCode, reason: str, client_id: str | None) -> ProduceResponse:
    """A request Kafka refuses whole before verifying or appending any of it: every partition it names
    is answered `code`, those refused earlier and those without transactional records too; with acks=0
    the connection closes."""
    log.info("produce rejected", client_id=client_id, error=code.name, reason=reason)
    if body.acks == 0:
        raise CloseConnection(f"acks=0 produce failed ({reason})")
    return ProduceResponse(throttle_time_ms=0, responses=[_TopicResponse(
        name=topic.name, partition_responses=[_error(data.index, code, reason) for data in topic.partition_data])
        for topic in body.topic_data])


def _error(index: int, code: ErrorCode, message: str) -> _PartitionResponse:
    """A partition refused before it reaches the replica manager (no log start offset, as in Kafka)."""
    return _PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                              log_start_offset=-1, error_message=message)


@handles(API_KEY, "3-12", advertised_min=0, decode=fastpath.decode_produce_request,
         encode=fastpath.encode_produce_response)
async def produce(broker: BrokerContext, request: Request[ProduceRequest],
                  connection: RequestContext) -> ProduceResponse | None:
    body = request.body
    version = request.api_version
    client_id = request.header.client_id
    topics = []
    entries: list[AppendEntry] = []  # what passed the checks here, for the replica manager
    slots: list[tuple[list, int, int]] = []  # where each entry's answer goes: (topic's answers, position, index)
    transactional = body.transactional_id is not None
    may_write_txn = transactional and allowed(broker, connection, Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                              body.transactional_id or "")
    verified: list[int] = []  # positions in entries of the transactional batches verified (KIP-890)
    verifies = transactional and broker.transactions.verifies(adds=version >= 12)
    producers: set[tuple[int, int]] = set()  # (id, epoch) of the transactional batches that reach the log
    # Transactional records where the request has no transactional id, or one without WRITE: Kafka refuses
    # the whole request (seen where each partition's batch is read; a refused partition's records are
    # looked at after the loop, only then)
    txn_unauthorized = False
    refused_records: list = []  # the records of partitions refused before their batch was read
    for topic_data in body.topic_data:
        results: list = []
        topics.append(_TopicResponse(name=topic_data.name, partition_responses=results))
        topic = broker.topics.get(topic_data.name)
        may_write = allowed(broker, connection, Operation.WRITE, ResourceType.TOPIC, topic_data.name)
        for data in topic_data.partition_data:
            index = data.index
            if not may_write:  # before existence, as Kafka checks it
                refused_records.append(data.records)
                results.append(_error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      "WRITE on the topic is needed to produce to it."))
                continue
            if topic is None or index not in topic.replicas:
                refused_records.append(data.records)
                results.append(_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      "This server does not host this topic-partition."))
                continue
            try:
                records, batch = _one_batch(data.records, version)
                attributes = batch.attributes
                # Kafka counts a control batch's producer too (its log refuses the batch later) and
                # leaves alone a transactional batch without a producer id
                in_txn = attributes & TRANSACTIONAL_BIT
                producer = batch.producer_id if in_txn else -1
                if producer >= 0:
                    producers.add((producer, batch.producer_epoch))
                if in_txn and not may_write_txn:
                    txn_unauthorized = True
                if attributes & CONTROL_BIT:
                    raise _Rejected(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
                if verifies and producer >= 0:
                    verified.append(len(entries))  # checked after the loop, before the append
            except _Rejected as exc:
                refused_records.append(data.records)
                log.info("produce rejected", partition=f"{topic.name}-{index}", client_id=client_id,
                         error=ErrorCode(exc.error_code).name, reason=exc.message)
                results.append(_error(index, exc.error_code, exc.message))
                continue
            slots.append((results, len(results), index))
            results.append(None)  # the replica manager's answer goes here
            entries.append((topic_data.name, index, records, batch))
    if not may_write_txn and not txn_unauthorized:
        txn_unauthorized = any(_first_batch_transactional(records) for records in refused_records)
    if txn_unauthorized:
        return _refused_whole(body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              _NO_TXN_ID if body.transactional_id is None else _NO_TXN_WRITE, client_id)
    if len(producers) > 1:
        return _refused_whole(body, ErrorCode.INVALID_PRODUCER_ID_MAPPING, _TWO_PRODUCERS, client_id)
    guards: dict[tuple[str, int], object] = {}
    if verified:
        assert body.transactional_id is not None
        entries, slots, guards = await _verify(broker, body.transactional_id, producers.pop(), verified, entries,
                                              slots, version, client_id)
    if entries:
        appended = await broker.replicas.append_records(entries, body.acks, body.timeout_ms, AppendOrigin.CLIENT,
                                                        internal_topics_allowed=client_id == ADMIN_CLIENT_ID,
                                                        verification_guards=guards)
        for (results, position, index), result in zip(slots, appended, strict=True):
            results[position] = _PartitionResponse(
                index=index, error_code=result.error_code, base_offset=result.base_offset,
                log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset,
                error_message=result.error_message,
                record_errors=[_RecordError(batch_index=i, batch_index_error_message=text)
                               for i, text in result.record_errors])
    quota = broker.quotas.produce
    throttle_ms = throttle_for(quota, connection, client_id, connection.request_bytes) if quota.enabled else 0
    if body.acks == 0:
        errors = [f"{t.name}-{r.index}: {ErrorCode(r.error_code).name}" for t in topics
                  for r in t.partition_responses if r.error_code]
        if errors:
            # No response can carry the error, so Kafka closes the connection: the client reconnects
            # and refreshes its metadata.
            raise CloseConnection(f"acks=0 produce failed ({', '.join(errors)})")
        return None
    return ProduceResponse(responses=topics, throttle_time_ms=throttle_ms)
