"""What the data path answers for one partition (broker/replica/manager.py writes the rules).

Kafka's fixed facts live here with the result types: which append errors are answered without the
partition's log start offset, and the acks values a writer may ask for.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from protocol.errors import CodedError, ErrorCode
from protocol.records import RecordBatch

if TYPE_CHECKING:
    from broker.replica.partition import Partition


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's AppendOrigin): a client's Produce, or the group coordinator's records."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


# (topic, partition, one record batch's bytes, that batch's header view)
AppendEntry = tuple[str, int, memoryview, RecordBatch]
VALID_ACKS = frozenset((0, 1, -1))


class AppendResult(NamedTuple):  # one per produced batch: a NamedTuple is made in C
    """A batch's offsets as appended (-1 when it was not), and the answer for it: an error after the
    append (acks=-1 timed out, leadership moved) keeps the offsets, as Kafka's answer does."""

    base_offset: int
    last_offset: int
    log_append_time: int  # -1 under CreateTime
    log_start_offset: int  # -1 where Kafka answers an error without it
    duplicate: bool = False  # an idempotent producer's retry, answered with the first write's offsets
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()  # (index in the batch, why): broker/log/validator.py


# Told an entry's position in the request and its result as soon as its batch is in the leader's log,
# before any acks wait: a coordinator's own records learn where they went (Kafka's runtime knows the
# offset when it appends, and waits for the high watermark apart).
Appended = Callable[[int, AppendResult], None]


# Append errors Kafka answers without the partition's log start offset (ReplicaManager.appendToLocalLog's
# "unknown append info" cases, and the checks made before the log is touched); every other append error
# (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS, ...) carries it.
_WITHOUT_START_OFFSET = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.INVALID_RECORD, ErrorCode.INVALID_REQUIRED_ACKS, ErrorCode.INVALID_TOPIC_EXCEPTION,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
})


def append_failure(code: ErrorCode, message: str, partition: Partition | None = None,
                   record_errors: tuple[tuple[int, str], ...] = (), plain: bool = False) -> AppendResult:
    """The answer for a batch refused before anything was written. Refused for its records (record
    errors: Kafka's RecordValidationException) it carries the log start offset whatever the code;
    `plain` (UnnamedAppendError): the log start offset and no message, Kafka's answer for an
    exception its append path does not name."""
    start = partition.log_start_offset if partition is not None and (
        record_errors or plain or code not in _WITHOUT_START_OFFSET) else -1
    return AppendResult(-1, -1, -1, start, False, code, None if plain else message, record_errors)


class DeleteOutcome(NamedTuple):
    """One partition's answer to ReplicaManager.delete_records (-1 for the offsets on errors)."""

    error_code: ErrorCode
    low_watermark: int
    leader_log_start_offset: int
    message: str | None = None


class PartitionError(CodedError):
    """A per-partition failure with the Kafka error code a handler answers with."""
