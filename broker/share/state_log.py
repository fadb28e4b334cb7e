"""`__share_group_state`: one ShareSnapshot record per write of a share-partition's state, in Kafka's
layout (its share coordinator's records).

    key   = int16 record type (0: ShareSnapshot) | ShareSnapshotKey v0 (group id, topic id, partition)
    value = int16 value version (0)             | ShareSnapshotValue v0, or null (the state was deleted)

Kafka writes ShareUpdate records (deltas) between snapshots; Ebb writes a whole snapshot every time (the
state of one share-partition is its start offset and a few ranges, and the topic is compacted); a
record of another type (never written by Ebb) is logged and skipped on replay.
A key lives in partition abs(java hashCode("group:topicId:partition")) % partitions, as in Kafka.
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from broker.coordinator_partitions import replay_log
from broker.group.offsets_store import partition_for
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import ShareSnapshotKey, ShareSnapshotValue

log = structlog.get_logger("share")

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_TYPE = 0
VALUE_VERSION = 0
_I16 = struct.Struct(">h")

StateKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)
StateBatch = tuple[int, int, int, int]  # first offset, last offset, delivery state, delivery count
# The start offset of a deleted state (Ebb's own mark; Kafka writes a tombstone): no write, initialization or
# leader stores an offset below -1, so it cannot be taken for a state (broker/share/coordinator.py).
DELETED_START = -2


@dataclass(frozen=True)
class ShareState:
    """What the share coordinator holds of one share-partition."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    create_ms: int
    snapshot_epoch: int = 0

    @property
    def deleted(self) -> bool:
        """DeleteShareGroupState's mark (DELETED_START): the share-partition has no state, as after Kafka's
        tombstone."""
        return self.start_offset == DELETED_START


_FINISHED = (2, 4)  # RecordState ACKNOWLEDGED and ARCHIVED (broker/share/partition.py)


def delivery_complete_count(state: ShareState) -> int:
    """KIP-1226's DeliveryCompleteCount of a stored state: the offsets at or past the start offset whose
    delivery is finished (acknowledged or archived); -1 without a start offset. Ebb counts them from the
    stored batches (Kafka stores the count its leader sends)."""
    if state.start_offset < 0:
        return -1
    return sum(last - max(first, state.start_offset) + 1 for first, last, kind, _ in state.batches
               if kind in _FINISHED and last >= state.start_offset)


def coordinator_key(key: StateKey) -> str:
    """Kafka's SharePartitionKey as a coordinator key: "group:topicId:partition" (the id as Kafka prints it)."""
    group, topic_id, partition = key
    return f"{group}:{base64.urlsafe_b64encode(topic_id.bytes).rstrip(b'=').decode()}:{partition}"


def parse_coordinator_key(text: str) -> StateKey:
    """"group:topicId:partition" back into a key (the group may hold colons: the last two parts are the
    topic id and partition, as Kafka's SharePartitionKey reads it); ValueError when it is not one."""
    parts = text.split(":")
    while parts and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    if len(parts) < 3:
        raise ValueError(f"share coordinator key {text!r}: not group:topicId:partition")
    group = ":".join(parts[:-2])
    if not group.strip():
        raise ValueError("the share coordinator key's group id is empty")
    raw = base64.urlsafe_b64decode(parts[-2] + "=" * (-len(parts[-2]) % 4))
    if len(raw) != 16:
        raise ValueError(f"share coordinator key: {parts[-2]!r} is not a topic id")
    return group, uuid.UUID(bytes=raw), int(parts[-1])


def partition_of(key: StateKey, partitions: int) -> int:
    return partition_for(coordinator_key(key), partitions)


def key_bytes(key: StateKey) -> bytes:
    group, topic_id, partition = key
    return _I16.pack(SNAPSHOT_TYPE) + ShareSnapshotKey[0].encode(
        ShareSnapshotKey(group_id=group, topic_id=topic_id, partition=partition))


def value_bytes(state: ShareState, write_ms: int) -> bytes:
    value = ShareSnapshotValue(
        snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
        start_offset=state.start_offset, create_timestamp=state.create_ms, write_timestamp=write_ms,
        state_batches=[ShareSnapshotValue.StateBatch(first_offset=f, last_offset=la, delivery_state=s,
                                                     delivery_count=c) for f, la, s, c in state.batches])
    return _I16.pack(VALUE_VERSION) + ShareSnapshotValue[VALUE_VERSION].encode(value)


def parse_record(key: bytes, value: bytes | None) -> tuple[StateKey, ShareState | None]:
    """(key, state or None for a tombstone); ProtocolError if malformed or of a kind not written here."""
    if len(key) < 2 or _I16.unpack_from(key)[0] != SNAPSHOT_TYPE:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, "not a ShareSnapshot key")
    parsed_key = ShareSnapshotKey[0].decode(memoryview(key)[2:])
    state_key = (parsed_key.group_id, parsed_key.topic_id, parsed_key.partition)
    if value is None:
        return state_key, None
    if len(value) < 2 or _I16.unpack_from(value)[0] != VALUE_VERSION:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, "ShareSnapshot value of an unknown version")
    v = ShareSnapshotValue[VALUE_VERSION].decode(memoryview(value)[2:])
    return state_key, ShareState(v.state_epoch, v.leader_epoch, v.start_offset,
                                 tuple((b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                       for b in v.state_batches), v.create_timestamp, v.snapshot_epoch)


def raise_leader_epoch(leader_epochs: dict[StateKey, int], key: StateKey, state: ShareState | None) -> None:
    """Kafka's leaderEpochMap after a record of `key`: the highest leader epoch since its last deletion
    (a tombstone or DELETED_START forget it)."""
    if state is None or state.deleted:
        leader_epochs.pop(key, None)
    else:
        leader_epochs[key] = max(leader_epochs.get(key, state.leader_epoch), state.leader_epoch)


async def replay_partition(partition, read_slices: Callable, found: dict[StateKey, ShareState | None],
                           leader_epochs: dict[StateKey, int]) -> int:
    """Read one `__share_group_state` partition from its log start to its end into `found` (the last
    record of a key wins) and `leader_epochs` (raise_leader_epoch); returns the records read. Malformed
    records are skipped and logged; a read that fails raises (the load is tried again: a partial state
    would restart share-partitions)."""
    def on_record(offset: int, key: bytes, value: bytes | None) -> None:
        try:
            state_key, state = parse_record(key, value)
        except (ProtocolError, ValueError) as exc:
            log.warning("malformed share state record skipped", offset=offset, error=str(exc))
            return
        found[state_key] = state
        raise_leader_epoch(leader_epochs, state_key, state)
    return await replay_log(partition, read_slices, on_record, stop_on_error=False)
