"""The records of `__consumer_offsets`, in Kafka's key and value formats.

A Kafka operator reading the topic (kafka-console-consumer with the offsets formatter, or any tool
built on Kafka's generated classes) sees the same bytes Kafka writes:

    key   = int16 record type | OffsetCommitKey v0     type 0 or 1: a committed offset (Kafka writes 1)
          = int16 record type | GroupMetadataKey v0    type 2: a group's membership and assignment
    value = int16 version | OffsetCommitValue / GroupMetadataValue at that version, or null (tombstone)

Written versions are the ones a Kafka 2.3+ broker writes: OffsetCommitValue v3 (v1 when the commit
carried an explicit retention time, OffsetCommit v2-v4) and GroupMetadataValue v3. Every version
0-4 is read, and newer versions as v4 (KIP-915: they only add tagged fields). Keys of other record
types are reported as unknown; the KIP-848 consumer group records (types 3-8, 16) are
consumer_records.py's, dispatched to it before these keys are parsed.
The specs are schemas/OffsetCommitKey.json, OffsetCommitValue.json, GroupMetadataKey.json and
GroupMetadataValue.json.
"""

from __future__ import annotations

import struct

from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue

OFFSET_COMMIT_KEY_TYPES = (0, 1)
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_KEY_TYPE = 1  # what Kafka writes
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3
NEWEST_KNOWN_VALUE_VERSION = 4
_I16 = struct.Struct(">h")


class UnknownRecord(Exception):
    """A key of a record type this broker does not know (skipped when loading)."""


def offset_key(group: str, topic: str, partition: int) -> bytes:
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return _I16.pack(OFFSET_COMMIT_KEY_TYPE) + OffsetCommitKey[0].encode(key)


def offset_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int,
                 expire_timestamp: int | None) -> bytes:
    version = OFFSET_VALUE_VERSION if expire_timestamp is None else OFFSET_VALUE_VERSION_WITH_EXPIRY
    value = OffsetCommitValue(offset=offset, leader_epoch=leader_epoch, metadata=metadata,
                              commit_timestamp=commit_timestamp,
                              expire_timestamp=-1 if expire_timestamp is None else expire_timestamp)
    return _I16.pack(version) + OffsetCommitValue[version].encode(value)


def group_key(group: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_TYPE) + GroupMetadataKey[0].encode(GroupMetadataKey(group=group))


def group_value(value: GroupMetadataValue) -> bytes:
    return _I16.pack(GROUP_VALUE_VERSION) + GroupMetadataValue[GROUP_VALUE_VERSION].encode(value)


def parse_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    """The key of one record; UnknownRecord for other record types, ProtocolError if malformed."""
    record_type = _version(data)
    if record_type in OFFSET_COMMIT_KEY_TYPES:
        return OffsetCommitKey[0].decode(memoryview(data)[2:])
    if record_type == GROUP_METADATA_KEY_TYPE:
        return GroupMetadataKey[0].decode(memoryview(data)[2:])
    raise UnknownRecord(f"record type {record_type}")


def parse_offset_value(data: bytes) -> OffsetCommitValue:
    return OffsetCommitValue[_value_version(data)].decode(memoryview(data)[2:])


def parse_group_value(data: bytes) -> GroupMetadataValue:
    return GroupMetadataValue[_value_version(data)].decode(memoryview(data)[2:])


def _version(data: bytes) -> int:
    if len(data) < 2:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, f"record key of {len(data)} bytes has no record type")
    return _I16.unpack_from(data, 0)[0]


def _value_version(data: bytes) -> int:
    version = _version(data)
    if version < 0:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, f"record value version {version}")
    return min(version, NEWEST_KNOWN_VALUE_VERSION)
