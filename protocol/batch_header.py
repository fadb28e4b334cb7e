"""The record batch header (magic 2): where each field lies, the attribute bits, reading it in one
unpack, and the leader's in-place edits of it. protocol/records.py re-exports all of it; the rest of
the code imports it from there, and protocol/_batch_scan.c, its compiled twin, is tested equal to it.

A batch is a 61-byte big-endian header followed by its records (compressed as one stream when the
codec bits say so):

    off  size  field                  off  size  field
      0     8  base_offset             27     8  base_timestamp
      8     4  batch_length            35     8  max_timestamp
     12     4  partition_leader_epoch  43     8  producer_id
     16     1  magic (= 2)             51     2  producer_epoch
     17     4  crc                     53     4  base_sequence
     21     2  attributes              57     4  records_count
     23     4  last_offset_delta       61     .  records

batch_length counts the bytes after itself, so a batch takes batch_length + 12 bytes. The CRC is
CRC-32C over bytes [21, end): base_offset, batch_length and partition_leader_epoch lie outside it, so
the leader can stamp offsets and its epoch without recomputing it. The magic byte sits at offset 16 in
every format, which is how legacy message sets (magic 0 and 1) are told apart.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from crc32c import crc32c

from protocol.errors import ErrorCode, ProtocolError
from protocol.record_format import Buffer, corrupt
from protocol.wire import I16, I32, I64, U32

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes batch_length does not count
MAGIC = 2
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
FRAMING_SIZE = 17  # base_offset, batch_length, partition_leader_epoch, magic: alike in every message format

# Where each field starts (the table above).
BASE_OFFSET_AT = 0
BATCH_LENGTH_AT = 8
LEADER_EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21  # the CRC covers from here to the end of the batch
LAST_OFFSET_DELTA_AT = 23
BASE_TIMESTAMP_AT = 27
MAX_TIMESTAMP_AT = 35
PRODUCER_ID_AT = 43
PRODUCER_EPOCH_AT = 51
BASE_SEQUENCE_AT = 53
RECORDS_COUNT_AT = 57

# The attributes' bits.
CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40  # the log cleaner set base_timestamp to the delete horizon (KIP-534)

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 13 fields in wire order
# batch_length and magic (unsigned) from the first FRAMING_SIZE bytes of a batch or a legacy message
# set: one unpack in C where a Python call per batch would show (the Produce handler's shape check).
BATCH_FRAMING = struct.Struct(">8xi4xB")
assert HEADER.size == BATCH_HEADER_SIZE and BATCH_FRAMING.size == FRAMING_SIZE == MAGIC_AT + 1


class BatchHeader(NamedTuple):
    """The 13 header fields, in wire order: what one unpack gives (see the table above)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes: batch_length + LOG_OVERHEAD."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


as_header = tuple.__new__  # (BatchHeader, an unpacked tuple): a NamedTuple without its Python-level __new__


def read_header(buf: Buffer, position: int = 0) -> BatchHeader:
    """The header of the batch at `position`, whose BATCH_HEADER_SIZE bytes the caller knows are there
    (struct.error otherwise). Nothing is checked: for batches already checked once (a segment file)."""
    return as_header(BatchHeader, HEADER.unpack_from(buf, position))


def batch_size_at(buf: Buffer, position: int = 0) -> int:
    """Bytes the batch at `position` claims to take (batch_length + LOG_OVERHEAD), from its first
    LOG_OVERHEAD bytes; the same field in every message format."""
    return I32.unpack_from(buf, position + BATCH_LENGTH_AT)[0] + LOG_OVERHEAD


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def check_magic(magic: int, position: int) -> None:
    """Nothing for magic 2; UNSUPPORTED_FOR_MESSAGE_FORMAT for a legacy message set, CORRUPT_MESSAGE else."""
    if magic == MAGIC:
        return
    if magic in (0, 1):
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
            f"message set with magic {magic} at position {position}; only magic 2 is supported",
        )
    raise corrupt(f"unknown magic {magic} at position {position}")


# --- in-place edits by the leader -----------------------------------------------------------------

WritableBuffer = bytearray | memoryview


def assign_offsets(buf: WritableBuffer, position: int, base_offset: int, partition_leader_epoch: int) -> int:
    """Stamp base_offset and partition_leader_epoch on the batch at `position`; return its last offset.

    Both fields lie outside the CRC, so the CRC stays valid.
    """
    I64.pack_into(buf, position + BASE_OFFSET_AT, base_offset)
    I32.pack_into(buf, position + LEADER_EPOCH_AT, partition_leader_epoch)
    return base_offset + I32.unpack_from(buf, position + LAST_OFFSET_DELTA_AT)[0]


def set_log_append_time(buf: WritableBuffer, position: int, timestamp_ms: int) -> None:
    """Mark the batch at `position` as LogAppendTime with `timestamp_ms`, and recompute its CRC."""
    _set_timestamp_type(buf, position, TIMESTAMP_TYPE_BIT, timestamp_ms)


def set_create_time(buf: WritableBuffer, position: int) -> None:
    """Mark the batch at `position` as CreateTime, its max timestamp kept (a producer's batch marked
    LogAppendTime, accepted by a CreateTime topic as Kafka does), and recompute its CRC."""
    _set_timestamp_type(buf, position, 0, I64.unpack_from(buf, position + MAX_TIMESTAMP_AT)[0])


def _set_timestamp_type(buf: WritableBuffer, position: int, bit: int, timestamp_ms: int) -> None:
    (attributes,) = I16.unpack_from(buf, position + ATTRIBUTES_AT)
    I16.pack_into(buf, position + ATTRIBUTES_AT, (attributes & ~TIMESTAMP_TYPE_BIT) | bit)
    I64.pack_into(buf, position + MAX_TIMESTAMP_AT, timestamp_ms)
    end = position + LOG_OVERHEAD + I32.unpack_from(buf, position + BATCH_LENGTH_AT)[0]
    U32.pack_into(buf, position + CRC_AT, crc32c(memoryview(buf)[position + ATTRIBUTES_AT : end]))
