"""Produce (key 0), versions 3-12; ApiVersions advertises 0-12.

v12 is transactions version 2 (KIP-890 part 2): a transactional batch to a partition not yet in the
producer's transaction makes this leader add it (the coordinator directly, or AddPartitionsToTxn v5
to it: broker/txn/verification.py), whatever `transaction.partition.verification.enable` says, as
Kafka's ReplicaManager; CONCURRENT_TRANSACTIONS is then answered as is.

Kafka 4.x advertises Produce from v0 although it refuses v0-2, because librdkafka's compression
check needs the advertised range to overlap v0 (KAFKA-18659); we do the same. A v0-2 request never
reaches this handler: the server closes the connection, as for any version outside 3-11.

A partition named more than once (in one topic entry or in two entries of its topic) is taken as
Kafka's maps take it: the last of its entries that passes the checks here (authorization, existence,
the batch's shape) is the one verified and written, and only the entries so kept count as the
request's producers below; an entry refused by those checks is the partition's answer (the last one
refused), whether it came before or after the entry written. The answer names each partition once, under
one entry per topic.

Refused whole (every partition it names answered the error, once; nothing verified or written;
acks=0: the connection closes), as Kafka refuses it:
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
- with verification on (and always at v12) a transactional batch whose producer has no transaction
  open on its partition yet is verified with the id's coordinator, this broker's own or another's, by one rule (KIP-890,
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
- a control batch from a client: INVALID_RECORD from the log (with the log start offset), as Kafka's
  LogValidator: a transactional one is verified first like any transactional batch (Kafka selects
  hasProducerId and isTransactional), so the coordinator's refusal is its answer, and at v12 its
  partition is added;
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

from collections.abc import Iterable

import structlog

from broker.handlers import CloseConnection, handles
from broker.handlers.context import BrokerContext
from broker.quotas.manager import throttle_for
from broker.replica import AppendOrigin
from broker.replica.outcomes import AppendEntry
from broker.request_context import RequestContext
from broker.security.access import allowed
from broker.topic import Topic
from broker.txn.verification import produce_error
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
TopicPartition = tuple[str, int]
_Slot = tuple[list, int, int]  # where an entry's answer goes: (its topic's answers, position, partition index)
# What the request's own checks keep, filled by _keep for both ways of reading a request: the entries for
# the log, their answers' slots, the positions among them of the batches verified (KIP-890) and the
# (id, epoch) of the transactional ones. A tuple of the lists, not an object: making an object per request
# cost the plain one-partition request 3% of the handler's time (CPython 3.11).
_Kept = tuple[list[AppendEntry], list[_Slot], list[int], set[tuple[int, int]]]


class _Rejected(CodedError):
    """A partition's batch refused before the log is touched."""


def _one_batch(records, version: int) -> tuple[memoryview, RecordBatch, int]:
    """ProduceRequest.validateRecords for v3+: exactly one complete magic-2 batch. Returns that
    batch's bytes (a partial tail shorter than a header is dropped, as Kafka trims it), the batch and
    its attributes (read once)."""
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
    return records[:size], batch, attributes


async def _verify(broker: BrokerContext, transactional_id: str, producer: tuple[int, int], verified: list[int],
                  entries: list[AppendEntry], slots: list[_Slot], version: int, client_id: str | None
                  ) -> tuple[list[AppendEntry], list[_Slot], dict[TopicPartition, object]]:
    """KIP-890 for the transactional batches at `verified` in `entries`, all of `producer` (id, epoch):
    broker/txn/verification.py takes each partition's guard and asks the id's coordinator (this
    broker's own, or another's) about the partitions where the producer has no transaction open yet;
    a batch of a transaction open on its partition is not asked about and presents
    OPEN_TRANSACTION_ONLY, so that a marker written meanwhile refuses it. The batches refused get
    their answer here and leave `entries`; returns (entries, slots, guards)."""
    sequences = {(name, index): batch.base_sequence for name, index, _, batch in map(entries.__getitem__, verified)}
    errors, guards = await broker.transactions.verifier.verify(
        transactional_id, *producer, list(sequences), add=version >= 12, abortable=version >= 11,
        sequences=sequences, retry_concurrent=version >= 12)
    if not errors:
        return entries, slots, guards
    kept_entries, kept_slots = [], []
    for entry, slot in zip(entries, slots, strict=True):
        found = errors.get((entry[0], entry[1]))
        if found is None:
            kept_entries.append(entry)
            kept_slots.append(slot)
            continue
        code = produce_error(found, add=version >= 12)
        results, position, index = slot
        message = (f"Partition {entry[0]}-{index} was not added to the transaction"
                   if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE)
                   else f"Unable to verify the partition has been added to the transaction ({code.name})")
        log.info("produce rejected", partition=f"{entry[0]}-{index}", client_id=client_id, error=code.name,
                 reason=message)
        results[position] = _error(index, code, message)
    return kept_entries, kept_slots, guards


def _admit(topic: Topic | None, may_write: bool, data: ProduceRequest.TopicProduceData.PartitionProduceData,
           version: int, client_id: str | None) -> tuple[memoryview, RecordBatch, int] | _PartitionResponse:
    """The request's own checks of one partition entry, in KafkaApis' order (WRITE on the topic, the
    partition's existence, the batch's shape): its batch (see _one_batch), or its answer."""
    index = data.index
    if not may_write:  # before existence, as Kafka checks it
        return _error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "WRITE on the topic is needed to produce to it.")
    if topic is None or index not in topic.replicas:
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    try:
        return _one_batch(data.records, version)
    except _Rejected as exc:
        log.info("produce rejected", partition=f"{topic.name}-{index}", client_id=client_id,
                 error=ErrorCode(exc.error_code).name, reason=exc.message)
        return _error(index, exc.error_code, exc.message)


_VERIFY = 1  # _screen's findings: the batch is verified with the transaction's coordinator (KIP-890)
_NO_TXN_RIGHT = 2  # a transactional batch without the request's transactional id or WRITE on it


def _screen(batch: RecordBatch, may_write_txn: bool, verifies: bool, producers: set[tuple[int, int]]) -> int:
    """What Kafka's replica manager checks of a transactional batch kept, before anything is appended:
    its producer (more than one among `producers` refuses the request whole), _NO_TXN_RIGHT (refuses
    it whole too), and _VERIFY where KIP-890 applies (hasProducerId and isTransactional: a client's
    control batch too, which the log refuses after, INVALID_RECORD). The other batches pass."""
    producer = batch.producer_id
    if producer < 0:
        return 0 if may_write_txn else _NO_TXN_RIGHT
    producers.add((producer, batch.producer_epoch))
    if not may_write_txn:
        return _NO_TXN_RIGHT
    return _VERIFY if verifies else 0


def _keep(kept: _Kept, name: str, index: int, admitted: tuple[memoryview, RecordBatch, int], results: list,
          position: int, may_write_txn: bool, verifies: bool) -> int:
    """An entry that passed _admit (`admitted` is what it returned) kept for the log, its answer to go to
    results[position]; a transactional batch is also screened. Returns _screen's findings (0 if not
    screened)."""
    records, read, attributes = admitted
    entries, slots, to_verify, producers = kept
    slots.append((results, position, index))
    entries.append((name, index, records, read))
    if not attributes & TRANSACTIONAL_BIT:
        return 0
    found = _screen(read, may_write_txn, verifies, producers)
    if found & _VERIFY:
        to_verify.append(len(entries) - 1)  # checked after the walk, before the append
    return found


def _first_batch_transactional(records) -> bool:
    """Whether a partition's records open with a complete transactional batch: what Kafka's
    RequestUtils.hasTransactionalRecords looks at (only headers are read)."""
    if records is None or len(records) < BATCH_HEADER_SIZE:
        return False
    batch_length, magic = BATCH_FRAMING.unpack_from(records)
    if magic != MAGIC or batch_length + LOG_OVERHEAD > len(records):
        return False
    return bool(I16.unpack_from(records, ATTRIBUTES_AT)[0] & TRANSACTIONAL_BIT)


def _refused_whole(named: Iterable[TopicPartition], acks: int, code: ErrorCode, reason: str,
                   client_id: str | None) -> ProduceResponse:
    """A request Kafka refuses whole before verifying or appending any of it: every partition it names
    (once, as Kafka lists them from its map of the request's partitions, one entry per topic) is answered
    `code`, those refused earlier and those without transactional records too; with acks=0 the
    connection closes."""
    log.info("produce rejected", client_id=client_id, error=code.name, reason=reason)
    if acks == 0:
        raise CloseConnection(f"acks=0 produce failed ({reason})")
    topics: dict[str, list[_PartitionResponse]] = {}
    for name, index in named:
        topics.setdefault(name, []).append(_error(index, code, reason))
    return ProduceResponse(throttle_time_ms=0, responses=[
        _TopicResponse(name=name, partition_responses=answers) for name, answers in topics.items()])


def _error(index: int, code: ErrorCode, message: str) -> _PartitionResponse:
    """A partition refused before it reaches the replica manager (no log start offset, as in Kafka)."""
    return _PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                              log_start_offset=-1, error_message=message)


def _named(topic_data: list[ProduceRequest.TopicProduceData]) -> Iterable[TopicPartition]:
    """The partitions a request names, as it names them."""
    return ((t.name, p.index) for t in topic_data for p in t.partition_data)


def _repeats(topic_data: list[ProduceRequest.TopicProduceData]) -> bool:
    """Whether the request names a partition more than once."""
    return len(set(_named(topic_data))) != sum(len(t.partition_data) for t in topic_data)


def _keyed(broker: BrokerContext, connection: RequestContext, body: ProduceRequest, version: int,
           client_id: str | None, may_write_txn: bool, verifies: bool, kept: _Kept, unscreened: list
           ) -> tuple[list[_TopicResponse], Iterable[TopicPartition], int]:
    """A request naming a partition more than once, taken as Kafka's maps key it: a partition's last
    entry that passes the request's checks is the one screened and written (into `kept`); an entry
    refused by them (the last) is its answer whether it came before or after the entry written; the
    answer names each partition once, under one entry per topic. The records of the entries refused or
    superseded go to `unscreened`. Returns the topics' answers, every partition named (once) and
    _screen's findings."""
    topics = []
    topic_answers: dict[str, list] = {}  # each topic named, once: its partitions' answers
    places: dict[TopicPartition, tuple[list, int]] = {}  # each partition named, once: where its answer goes
    refused: dict[TopicPartition, _PartitionResponse] = {}
    last: dict[TopicPartition, tuple[memoryview, RecordBatch, int]] = {}  # each partition's last entry passing
    for topic_data in body.topic_data:
        name = topic_data.name
        results = topic_answers.get(name)
        if results is None:
            results = topic_answers[name] = []
            topics.append(_TopicResponse(name=name, partition_responses=results))
        topic = broker.topics.get(name)
        may_write = allowed(broker, connection, Operation.WRITE, ResourceType.TOPIC, name)
        for data in topic_data.partition_data:
            tp = (name, data.index)
            if tp not in places:
                places[tp] = (results, len(results))
                results.append(None)  # its answer, once known
            admitted = _admit(topic, may_write, data, version, client_id)
            if isinstance(admitted, _PartitionResponse):
                unscreened.append(data.records)
                refused[tp] = admitted
                continue
            earlier = last.get(tp)
            if earlier is not None:
                unscreened.append(earlier[0])
            last[tp] = admitted
    for tp, answer in refused.items():
        results, position = places[tp]
        results[position] = answer
    unused: list = [None]  # where the answers of the partitions refused by another entry go
    found = 0
    for (name, index), admitted in last.items():
        # a partition refused by another entry is still written, its answer unused
        results, position = places[(name, index)] if (name, index) not in refused else (unused, 0)
        found |= _keep(kept, name, index, admitted, results, position, may_write_txn, verifies)
    return topics, places, found


@handles(API_KEY, "3-12", advertised_min=0, decode=fastpath.decode_produce_request,
         encode=fastpath.encode_produce_response)
async def produce(broker: BrokerContext, request: Request[ProduceRequest],
                  connection: RequestContext) -> ProduceResponse | None:
    body = request.body
    version = request.api_version
    client_id = request.header.client_id
    transactional = body.transactional_id is not None
    may_write_txn = transactional and allowed(broker, connection, Operation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                              body.transactional_id or "")
    verifies = transactional and broker.transactions.verifies(adds=version >= 12)
    kept: _Kept = ([], [], [], set())
    entries, slots, verified, producers = kept
    unscreened: list = []  # the records of the entries refused before their batch was read (or superseded)
    topic_data = body.topic_data
    named: Iterable[TopicPartition] | None = None  # each partition named, once; None: as the request names them
    # one topic entry with one partition cannot name a partition twice: the common request, not counted
    if (len(topic_data) != 1 or len(topic_data[0].partition_data) > 1) and _repeats(topic_data):
        topics, named, found = _keyed(broker, connection, body, version, client_id, may_write_txn, verifies, kept,
                                      unscreened)
    else:  # each partition named once (the common request): every entry checked and answered in place
        topics = []
        found = 0  # _screen's findings, together
        for topic_entry in topic_data:
            name = topic_entry.name
            results: list = []
            topics.append(_TopicResponse(name=name, partition_responses=results))
            topic = broker.topics.get(name)
            may_write = allowed(broker, connection, Operation.WRITE, ResourceType.TOPIC, name)
            for data in topic_entry.partition_data:
                admitted = _admit(topic, may_write, data, version, client_id)
                if isinstance(admitted, _PartitionResponse):
                    unscreened.append(data.records)
                    results.append(admitted)
                    continue
                found |= _keep(kept, name, data.index, admitted, results, len(results), may_write_txn, verifies)
                results.append(None)  # the replica manager's answer goes here
    # Transactional records where the request has no transactional id, or one without WRITE: Kafka refuses
    # the whole request (seen as each kept batch is screened; the records of the entries not screened are
    # looked at only now)
    if not may_write_txn and (found & _NO_TXN_RIGHT or any(_first_batch_transactional(r) for r in unscreened)):
        return _refused_whole(named or _named(topic_data), body.acks, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              _NO_TXN_ID if body.transactional_id is None else _NO_TXN_WRITE, client_id)
    if len(producers) > 1:
        return _refused_whole(named or _named(topic_data), body.acks, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                              _TWO_PRODUCERS, client_id)
    guards: dict[TopicPartition, object] = {}
    if verified:
        assert body.transactional_id is not None
        entries, slots, guards = await _verify(broker, body.transactional_id, producers.pop(), verified,
                                               entries, slots, version, client_id)
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
