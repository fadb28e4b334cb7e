"""Names, types and errors shared by the log modules.

Offsets are plain ints on disk and on the wire; `Offset` marks the ones the log hands out so a
position or a size is not passed where an offset belongs.
"""

from __future__ import annotations

import os
import re
import signal
from enum import Enum
from pathlib import Path
from typing import NamedTuple, NewType

from protocol.errors import CodedError, ErrorCode, FixedCodeError

Offset = NewType("Offset", int)
LeaderEpoch = NewType("LeaderEpoch", int)

NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1


LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # aborted transactions (broker/log/txn_index.py)
DELETED_SUFFIX = ".deleted"
TMP_SUFFIX = ".tmp"
DELETE_DIR_SUFFIX = "-delete"

_DELETE_DIR = re.compile(r"^(\S+)-(\d+)\.([0-9a-f]{32})-delete$")
_PARTITION_DIR = re.compile(r"^([a-zA-Z0-9._-]+)-(\d+)$")
MAX_TOPIC_LENGTH = 249
MAX_DIR_NAME = 255


# Test-only: stop the whole process (SIGSTOP) when a segment swap reaches this point, so that a test can
# kill it there. The cleaner's: "cleaned" (a `.cleaned` segment written, nothing swapped) and "swap" (the
# old segment files renamed `.deleted`, the new one still `.swap`); erasure's (broker/log/erasure.py):
# "erasure-copied" and "erasure-swap", the same two moments.
STOP_AT_ENV = "EBB_TEST_CLEANER_STOP_AT"


def stop_for_test(point: str) -> None:
    if os.environ.get(STOP_AT_ENV) == point:
        os.kill(os.getpid(), signal.SIGSTOP)


class TopicPartition(NamedTuple):
    """A NamedTuple rather than a frozen dataclass: it keys every partition lookup of the data path,
    and a tuple hashes and compares in C."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def from_dir_name(cls, name: str) -> TopicPartition | None:
        """Parse `<topic>-<partition>`; None for anything else (deleted, future, stray dirs, files)."""
        match = _PARTITION_DIR.match(name)
        if match is None or len(match.group(1)) > MAX_TOPIC_LENGTH:
            return None
        return cls(match.group(1), int(match.group(2)))


def delete_dir_name(tp: TopicPartition, unique_hex: str) -> str:
    """`<topic>-<partition>.<uuid hex>-delete`, the topic cut so the name fits in 255 characters."""
    tail = f"-{tp.partition}.{unique_hex}{DELETE_DIR_SUFFIX}"
    return tp.topic[: MAX_DIR_NAME - len(tail)] + tail


def is_delete_dir(name: str) -> bool:
    return _DELETE_DIR.match(name) is not None


def segment_prefix(base_offset: int) -> str:
    return f"{base_offset:020d}"


def segment_paths(directory: Path, base_offset: int) -> tuple[Path, Path, Path]:
    """(.log, .index, .timeindex) paths of the segment starting at `base_offset`."""
    prefix = directory / segment_prefix(base_offset)
    return (
        prefix.with_name(prefix.name + LOG_SUFFIX),
        prefix.with_name(prefix.name + INDEX_SUFFIX),
        prefix.with_name(prefix.name + TIME_INDEX_SUFFIX),
    )


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """`00000000000000001234.index` -> (1234, ".index"); None if the name is not a segment file."""
    stem, dot, suffix = name.partition(".")
    if not dot or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem), "." + suffix


class StartOffsetReason(Enum):
    """Why the log start offset moved (LogStartOffsetIncrementReason in Kafka)."""

    LEADER_OFFSET_INCREMENTED = "leader offset increment"
    SEGMENT_DELETION = "segment deletion"
    CLIENT_RECORD_DELETION = "client delete records request"
    SNAPSHOT_GENERATED = "snapshot generated"
    COMMITTED_OFFSETS = "consumer groups committed past it"  # Ebb's retention.committed.groups


class LogError(CodedError):
    """A log operation failed; `error_code` is what a handler answers with."""


class OffsetOutOfRangeError(FixedCodeError, LogError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class InvalidRecordError(LogError):
    """Rejected input on append: CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, ...
    `record_errors`: (index in the batch, message) of the records that caused it, for Produce v8+."""

    def __init__(self, error_code: ErrorCode, message: str,
                 record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(error_code, message)
        self.record_errors = record_errors or []


class UnnamedAppendError(InvalidRecordError):
    """A batch refused by an exception Kafka's append path does not name: its InvalidRecordException
    out of the record iterator (INVALID_RECORD: a record does not parse, bytes follow the last), or an
    IllegalArgumentException out of its batch builder (UNKNOWN_SERVER_ERROR). Answered as Kafka does,
    with the log start offset and without a message (the message is logged)."""

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.INVALID_RECORD) -> None:
        super().__init__(error_code, message)


class PolicyViolationError(FixedCodeError, LogError):
    error_code = ErrorCode.POLICY_VIOLATION


class StorageError(FixedCodeError, LogError):
    """The partition (or its log dir) hit an I/O error and is offline."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class InconsistentTopicIdError(FixedCodeError, LogError):
    error_code = ErrorCode.INCONSISTENT_TOPIC_ID


class CorruptCheckpointError(Exception):
    """A checkpoint or metadata file does not parse. Callers rebuild what it held and log it."""
