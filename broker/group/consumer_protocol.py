"""The consumer's embedded protocol as a coordinator reads and writes it when classic members share a group
with KIP-848 members (Kafka's ConsumerProtocol): a JoinGroup protocol's ConsumerProtocolSubscription (int16
version, then the body), and the ConsumerProtocolAssignment a SyncGroup answer or a GroupMetadata record
carries. A version newer than the layouts known is read with the newest (fields are only appended).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from io import BytesIO

from broker.group.group import GroupError
from protocol.errors import ErrorCode
from protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

NEWEST = 3  # both layouts' newest version
_I16 = struct.Struct(">h")

# topic name -> (id, partition count), as the coordinator sees the topics now
TopicIds = dict[str, tuple[uuid.UUID, int]]


class MalformedProtocol(GroupError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, message)


@dataclass(frozen=True)
class Subscription:
    version: int
    topics: list[str]
    owned: dict[str, set[int]]  # v1+: the partitions the member holds now, by topic name
    rack_id: str | None


def version_of(metadata: bytes) -> int:
    """The embedded protocol's version, capped at the newest layout (Kafka's deserializeVersion)."""
    if len(metadata) < 2:
        raise MalformedProtocol("embedded consumer protocol shorter than its version")
    version = _I16.unpack_from(metadata, 0)[0]
    if version < 0:
        raise MalformedProtocol(f"embedded consumer protocol version {version}")
    return min(version, NEWEST)


def decode_subscription(metadata: bytes) -> Subscription:
    version = version_of(metadata)
    try:
        body = ConsumerProtocolSubscription[version].codec.decode_from(BytesIO(bytes(metadata)[2:]))
    except Exception as exc:  # garbage in a client's metadata: a refusal, never a crash
        raise MalformedProtocol(f"malformed ConsumerProtocolSubscription: {exc}") from exc
    owned: dict[str, set[int]] = {}
    for tp in (body.owned_partitions if version >= 1 else []):
        owned.setdefault(tp.topic, set()).update(tp.partitions)
    return Subscription(version, list(body.topics), owned, body.rack_id if version >= 3 else None)


def decode_assignment(data: bytes) -> tuple[dict[str, set[int]], bytes | None]:
    """(partitions by topic name, user data); empty bytes are no assignment (a member never synced)."""
    if not data:
        return {}, None
    version = version_of(data)
    try:
        body = ConsumerProtocolAssignment[version].codec.decode_from(BytesIO(bytes(data)[2:]))
    except Exception as exc:
        raise MalformedProtocol(f"malformed ConsumerProtocolAssignment: {exc}") from exc
    found: dict[str, set[int]] = {}
    for tp in body.assigned_partitions:
        found.setdefault(tp.topic, set()).update(tp.partitions)
    return found, body.user_data


def encode_assignment(version: int, partitions: dict[str, set[int]]) -> bytes:
    value = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=sorted(p))
        for t, p in sorted(partitions.items()) if p], user_data=None)
    return _I16.pack(version) + ConsumerProtocolAssignment[version].encode(value)


def by_id(partitions: dict[str, set[int]], topics: TopicIds) -> dict[uuid.UUID, set[int]]:
    """Names to topic ids; topics that no longer exist are dropped (as Kafka's metadata image does)."""
    return {topics[name][0]: set(parts) for name, parts in partitions.items() if name in topics and parts}


def by_name(partitions: dict[uuid.UUID, set[int]], topics: TopicIds) -> dict[str, set[int]]:
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    return {names[t]: set(p) for t, p in partitions.items() if t in names and p}
