"""`__transaction_state`: one record per change of a transactional id's state, in Kafka's layout.

    key   = int16 key version (0) | TransactionLogKey v0 (the transactional id)
    value = int16 value version   | TransactionLogValue at that version, or null (the id expired)

Ebb writes the value version Kafka writes for the cluster's finalized transaction.version: 0 at
level 0, 1 (flexible, with PreviousProducerId, NextProducerId and ClientTransactionVersion as tagged
fields) from level 1; it reads both. An Empty state's partitions are null, as Kafka writes them.
The topic is internal and compacted, `transaction.state.log.num.partitions` partitions of
`transaction.state.log.segment.bytes` segments, `min.insync.replicas` =
`transaction.state.log.min.isr`; an id lives in partition abs(java hashCode(id)) % partitions, as a
group does in `__consumer_offsets`. Records are written
through ReplicaManager.append_records with acks=-1, like the group coordinator's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

import structlog

from broker.coordinator_partitions import replay_log
from broker.group.offsets_store import java_string_hash
from broker.replica import AppendOrigin, ReplicaManager
from protocol.errors import CodedError, ErrorCode, ProtocolError
from protocol.messages import TransactionLogKey, TransactionLogValue
from protocol.records import RecordBatch, build_batch

log = structlog.get_logger("transactions")

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
NEWEST_KNOWN_VALUE_VERSION = 1
WRITE_TIMEOUT_MS = 5000  # Kafka's request.timeout.ms for the coordinator's own appends
_I16 = struct.Struct(">h")


class TxnError(CodedError):
    """A transactional request refused, with the error code its answer carries."""


class TxnState(IntEnum):
    """Kafka's TransactionState ids, as stored in TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """Kafka's name for the state (DescribeTransactions, ListTransactions, the tools)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


TopicPartitionKey = tuple[str, int]


@dataclass(slots=True)
class TxnMetadata:
    """What the coordinator knows of one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartitionKey] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    last_producer_epoch: int = -1  # the epoch before the last bump (a retried InitProducerId)
    pending: bool = False  # a state change is being written: concurrent requests wait their turn
    prev_producer_id: int = -1  # transactions version 2: the id before the last new producer id
    next_producer_id: int = -1  # transactions version 2: the id taken when the epoch ran out, until Complete
    client_transaction_version: int = 0  # the transactions version the producer last spoke


def value_version(transaction_version: int) -> int:
    """Kafka's TransactionVersion.transactionLogValueVersion: flexible records from level 1."""
    return 1 if transaction_version >= 1 else 0


def key_bytes(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + TransactionLogKey[0].encode(TransactionLogKey(transactional_id=transactional_id))


def _java_hash_order(keys: list, hash_of: Callable) -> list:
    """The order a java.util.HashMap/HashSet of `keys` iterates in: by bucket of the spread hash in a
    table grown from 16 until at most 0.75 full (ties keep the given order). Kafka lists a
    transaction's partitions from a HashSet, grouped by topic in a HashMap: DumpLogSegments then
    prints the same lists for Ebb's records as for Kafka's."""
    capacity = 16
    while len(keys) > capacity * 0.75:
        capacity *= 2

    def bucket(key) -> int:
        h = hash_of(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(keys, key=bucket)


def _topic_partition_hash(tp: TopicPartitionKey) -> int:
    """Java's TopicPartition.hashCode."""
    return 31 * (31 + tp[1]) + java_string_hash(tp[0])


def value_bytes(meta: TxnMetadata, version: int) -> bytes:
    """The value recording `meta` (the id's state after the change) at value `version`."""
    by_topic: dict[str, list[int]] = {}
    for topic, index in _java_hash_order(sorted(meta.partitions), _topic_partition_hash):
        by_topic.setdefault(topic, []).append(index)
    value = TransactionLogValue(
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, transaction_timeout_ms=meta.timeout_ms,
        transaction_status=int(meta.state),
        transaction_partitions=None if meta.state == TxnState.EMPTY else [
            TransactionLogValue.PartitionsSchema(topic=t, partition_ids=by_topic[t])
            for t in _java_hash_order(list(by_topic), java_string_hash)],
        transaction_last_update_timestamp_ms=meta.update_ms, transaction_start_timestamp_ms=meta.start_ms,
        previous_producer_id=meta.prev_producer_id, next_producer_id=meta.next_producer_id,
        client_transaction_version=meta.client_transaction_version)
    return _I16.pack(version) + TransactionLogValue[version].encode(value)


async def append_state(replicas: ReplicaManager, records: dict[int, list[tuple[bytes, bytes | None]]],
                       now_ms: int) -> dict[int, tuple[ErrorCode, str | None]]:
    """Write (key, value or None for a tombstone) records, one batch per partition, acks=-1; each
    partition's (error, message)."""
    batches = []
    for index, pairs in records.items():
        data = build_batch([(key, value, [], now_ms) for key, value in pairs])
        batches.append((TRANSACTION_STATE_TOPIC, index, memoryview(data), RecordBatch(data)))
    results = await replicas.append_records(batches, required_acks=-1, timeout_ms=WRITE_TIMEOUT_MS,
                                            origin=AppendOrigin.COORDINATOR, internal_topics_allowed=True)
    return {index: (ErrorCode(result.error_code), result.error_message)
            for index, result in zip(records, results, strict=True)}


def parse_record(key: bytes, value: bytes | None) -> tuple[str, TxnMetadata | None]:
    """(transactional id, its metadata or None for a tombstone); ProtocolError if malformed."""
    if len(key) < 2 or _I16.unpack_from(key)[0] != KEY_VERSION:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, "not a transaction log key")
    transactional_id = TransactionLogKey[0].decode(memoryview(key)[2:]).transactional_id
    if value is None:
        return transactional_id, None
    if len(value) < 2:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, "transaction log value without a version")
    version = _I16.unpack_from(value)[0]
    if version < 0:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, f"transaction log value version {version}")
    parsed = TransactionLogValue[min(version, NEWEST_KNOWN_VALUE_VERSION)].decode(memoryview(value)[2:])
    partitions = {(p.topic, index) for p in parsed.transaction_partitions or () for index in p.partition_ids}
    return transactional_id, TxnMetadata(
        transactional_id, parsed.producer_id, parsed.producer_epoch, parsed.transaction_timeout_ms,
        TxnState(parsed.transaction_status), partitions, parsed.transaction_start_timestamp_ms,
        parsed.transaction_last_update_timestamp_ms,
        prev_producer_id=getattr(parsed, "previous_producer_id", -1),
        next_producer_id=getattr(parsed, "next_producer_id", -1),
        client_transaction_version=getattr(parsed, "client_transaction_version", 0))


async def replay_partition(partition, read_slices: Callable, found: dict[str, TxnMetadata | None]) -> int:
    """Read one `__transaction_state` partition from its log start to its end into `found` (the last
    record of an id wins); returns the records read. Malformed records are skipped and logged."""
    def on_record(offset: int, key: bytes, value: bytes | None) -> None:
        try:
            transactional_id, meta = parse_record(key, value)
        except (ProtocolError, ValueError) as exc:
            log.warning("malformed transaction state record skipped", offset=offset, error=str(exc))
            return
        found[transactional_id] = meta
    return await replay_log(partition, read_slices, on_record, stop_on_error=True)
