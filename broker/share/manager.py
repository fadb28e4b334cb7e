"""The share-partitions this broker leads and the share sessions of the consumers fetching from it
(Kafka's SharePartitionManager): ShareFetch's reads and acquisitions, ShareAcknowledge's
acknowledgements.

A share-partition whose state was initialized without a start offset (its group coordinator's
InitializeShareGroupState) starts, on its first fetch, where the group's share.auto.offset.reset says: the
log start offset (earliest), the high watermark (latest, the default) or the first offset at or after now
minus the duration (by_duration:<ISO-8601>). One its share coordinator has no state for is not made here:
the fetch answers it UNKNOWN_SERVER_ERROR and keeps nothing, and the next fetch reads again (Kafka 4.3.1's
leader, whose share coordinator refuses the read with INVALID_REQUEST); that is a member fetching a
partition its group never assigned. Reads go to the high watermark, or to the last stable offset under
share.isolation.level=read_committed, where the data batches of aborted transactions (told by the log's
aborted transaction index) are acquired and archived at once, never delivered, as Kafka's SharePartition
does. Record bytes are the log's own batches, read off the event loop and sent as stored: only their
headers are looked at, to learn their offsets, producers and kinds.

Each share-partition's state (the start offset, what was acknowledged or archived past it, the
delivery counts) is kept by its share coordinator in `__share_group_state` (broker/share/coordinator.py,
reached through broker/share/persister.py): written after every change that finishes or releases
records (an acknowledgement is answered once the write is), and read when this broker starts leading
the share-partition (its first fetch after a start, a leadership move or a reassignment): a new
leader continues where the old one stopped, records acquired then becoming Available again. A state
file `share-<sha256 of the group id>.state` left in the partition's directory by an older Ebb is read
once, when the coordinator has no state for it (or only an older Ebb's group's, at state epoch 0), written
to the coordinator at state epoch 1 (so that the group coordinator's initialization of a state it found
missing, at 0, cannot reset it) and removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import struct
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

from broker.aio import KeyedLocks
from broker.log.common import LogError, TopicPartition
from broker.log.free_space import NO_SPACE_ERRNOS
from broker.log.txn_index import AbortedTxn
from broker.replica import Partition, PartitionError, ReplicaManager
from broker.share.partition import Acquired, Batch, ShareLimits, SharePartition
from broker.share.persister import (
    MIGRATED_STATE_EPOCH,
    OLDER_EBB_STATE_EPOCH,
    PersisterError,
    StatePersister,
    Summary,
)
from broker.share.sessions import ShareSession, ShareSessionCache
from broker.share.state_log import StateKey
from broker.topic import Topic
from protocol.batch_header import (
    ATTRIBUTES_AT,
    CONTROL_BIT,
    LAST_OFFSET_DELTA_AT,
    LOG_OVERHEAD,
    PRODUCER_ID_AT,
    TRANSACTIONAL_BIT,
)
from protocol.errors import ErrorCode

log = structlog.get_logger("share")

# What DescribeShareGroupOffsets shows of a partition: (start offset, leader epoch, lag), None without
# state, or the error its share coordinator could not be had with.
Described = tuple[int, int, int] | None | ErrorCode
MAX_SHARE_SESSIONS = 2000  # Kafka's group.share.max.share.sessions default
_FRAME = struct.Struct(">qi")  # base offset, batch length
_SMALL = struct.Struct(">h")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_DURATION = re.compile(r"\+?P(?:\+?(\d+)D)?(?:T(?:\+?(\d+)H)?(?:\+?(\d+)M)?(?:\+?(\d+(?:[.,]\d{0,9})?)S)?)?",
                       re.IGNORECASE)


@dataclass(frozen=True)
class ShareSettings:
    """A group's share.* configs as one fetch uses them."""

    limits: ShareLimits
    reset: str  # earliest, latest, by_duration:<duration>
    read_committed: bool

    @classmethod
    def of(cls, overrides: Mapping[str, str], broker: Mapping[str, int]) -> ShareSettings:
        def number(name: str) -> int:
            return int(overrides.get(name, broker["group." + name]))
        return cls(ShareLimits(number("share.record.lock.duration.ms"), number("share.delivery.count.limit"),
                               number("share.partition.max.record.locks")),
                   overrides.get("share.auto.offset.reset", "latest"),
                   overrides.get("share.isolation.level", "read_uncommitted") == "read_committed")


@dataclass
class PartitionRead:
    """One partition's part of a ShareFetch answer."""

    records: bytes = b""
    acquired: tuple[Acquired, ...] = ()
    error: ErrorCode = ErrorCode.NONE


Key = tuple[str, uuid.UUID, int]  # (group, topic id, partition): a re-created topic is another key


class ShareStateError(Exception):
    """The state could not be read or written: the partition's answer carries `error_code`."""

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


class StateReadError(ShareStateError):
    """The share coordinator refused or could not answer the read of a share-partition's state (its
    error): a ShareFetch answers it as Kafka's SharePartition does (`persister_error`)."""


class Uninitialized(StateReadError):
    """The share coordinator holds no state for the share-partition (Kafka's shard refuses the read with
    INVALID_REQUEST): its group coordinator has not initialized it, so its leader does not make one."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST)


# A state write's refusals that say the state this leader holds was replaced (AlterShareGroupOffsets) or
# deleted (DeleteShareGroupOffsets, DeleteGroups: no state, INVALID_REQUEST) since it was read.
_STATE_GONE = (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.INVALID_REQUEST)
_COORDINATOR_AWAY = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


def persister_error(error: ErrorCode) -> ErrorCode:
    """A failed state read or write as a ShareFetch or an acknowledgement answers it (Kafka's
    SharePartition.fetchPersisterError): the coordinator moving or loading COORDINATOR_NOT_AVAILABLE,
    fencing NOT_LEADER_OR_FOLLOWER, a missing group, topic or partition as it is, anything else (an
    uninitialized or deleted share-partition's INVALID_REQUEST too) UNKNOWN_SERVER_ERROR."""
    if error in _COORDINATOR_AWAY:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return error
    if error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_SERVER_ERROR


class SharePartitionManager:
    def __init__(self, replicas: ReplicaManager, persister: StatePersister) -> None:
        self._replicas = replicas
        self.persister = persister
        self.partitions: dict[Key, SharePartition] = {}
        self._owners: dict[Key, Partition] = {}  # the replica each share-partition was made on
        self.sessions = ShareSessionCache(MAX_SHARE_SESSIONS)
        self._writing = KeyedLocks()  # one state write at a time per share-partition
        self._drops = 0  # share-partitions dropped so far: a read begun before a drop is not trusted
        replicas.leadership_listeners.append(self._role_changed)
        replicas.forget_listeners.append(self._forgotten)

    @staticmethod
    def _key(group_id: str, partition: Partition) -> Key:
        return group_id, partition.topic_id, partition.topic_partition.partition

    def share_partition(self, group_id: str, partition: Partition) -> SharePartition | None:
        return self.partitions.get(self._key(group_id, partition))

    def _put(self, key: Key, partition: Partition, share: SharePartition) -> SharePartition:
        self.partitions[key] = share
        self._owners[key] = partition
        return share

    def _drop(self, key: Key) -> None:
        """The share-partition goes from memory (its locks with it); its stored state is left as it is."""
        self._drops += 1
        self._owners.pop(key, None)
        old = self.partitions.pop(key, None)
        if old is not None:
            old.close()

    def _role_changed(self, partition: Partition) -> None:
        """No longer the leader: the share-partitions of this replica go (acquired records with them);
        leading again reads the state back from its share coordinator, as after a restart."""
        if not partition.is_leader:
            for key in [k for k, owner in self._owners.items() if owner is partition]:
                self._drop(key)

    def _forgotten(self, tp: TopicPartition) -> None:
        """The replica went (topic deleted, reassigned away, log dir failed): so do its share-partitions."""
        for key in [k for k, owner in self._owners.items() if owner.topic_partition == tp]:
            self._drop(key)

    async def _read_state(self, group_id: str, partition: Partition) -> tuple[SharePartition | None, int, int]:
        """The stored share-partition (None: its start is left to share.auto.offset.reset), the drop count
        the read began at and the state epoch it has. Uninitialized when its share coordinator has no state
        for it (never initialized, or deleted); StateReadError when the coordinator failed. An older Ebb's
        state file is moved into the coordinator (once) when there is no state, or only one no leader
        wrote at state epoch 0 (an older Ebb's leader's read, or its group's initialization)."""
        drops = self._drops
        key = self._key(group_id, partition)
        released = lambda: self._released(group_id, partition)  # noqa: E731
        try:
            state = await self.persister.read(key, partition.leader_epoch)
        except PersisterError as exc:
            if exc.error_code != ErrorCode.INVALID_REQUEST:
                raise StateReadError(exc.error_code) from None
            state = None  # refused: no state, or deleted (a read of ours names no negative partition)
        if state is None or (state.start_offset < 0 and state.state_epoch == OLDER_EBB_STATE_EPOCH):
            migrated = await self._migrated(group_id, partition, released)
            if migrated is not None:
                return migrated, drops, MIGRATED_STATE_EPOCH
            if state is None:
                raise Uninitialized()
        if state.start_offset < 0:  # initialized without a start offset: the reset rule's
            return None, drops, state.state_epoch
        try:
            return SharePartition.from_state(state.start_offset, state.batches, released, state.state_epoch,
                                             limit=partition.log.log_end_offset), drops, state.state_epoch
        except ValueError as exc:
            log.warning("share-partition state unreadable: starting afresh", group=group_id,
                        partition=str(partition.topic_partition), error=str(exc))
            return None, drops, state.state_epoch + 1

    async def _migrated(self, group_id: str, partition: Partition, released) -> SharePartition | None:
        """An older Ebb's state file, moved into the coordinator (initialized at MIGRATED_STATE_EPOCH, then
        written) and removed; None when there is none."""
        path = _state_path(group_id, partition)
        try:
            saved = await partition.log.io.run(_read_if_there, path)
        except OSError as exc:
            raise self._storage_failed(partition, "share-partition state file read", exc) from exc
        if _checked(saved, group_id, partition) is None:
            return None
        assert saved is not None
        share = SharePartition.restore(saved, group_id, released=released)
        share.state_epoch = MIGRATED_STATE_EPOCH
        try:
            await self.persister.move_in(self._key(group_id, partition), MIGRATED_STATE_EPOCH, partition.leader_epoch,
                                         share.start_offset, share.state_batches())
            await partition.log.io.remove_files([path])
        except PersisterError as exc:
            raise StateReadError(exc.error_code) from None
        except OSError as exc:
            raise self._storage_failed(partition, "share-partition state file removal", exc) from exc
        log.info("share-partition state file moved to the share coordinator", group=group_id,
                 partition=str(partition.topic_partition))
        return share

    def _storage_failed(self, partition: Partition, action: str, exc: OSError) -> ShareStateError:
        """A state file's I/O error. The dir gone (its topic deleted): UNKNOWN_TOPIC_OR_PARTITION; a
        full disk: KAFKA_STORAGE_ERROR; any other error takes the log dir offline, as the log's own do."""
        if isinstance(exc, FileNotFoundError):
            return ShareStateError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        log.warning("share-partition state I/O failed", partition=str(partition.topic_partition), action=action,
                    error=repr(exc))
        if exc.errno not in NO_SPACE_ERRNOS:
            partition.log.io_failed(action, exc)
        return ShareStateError(ErrorCode.KAFKA_STORAGE_ERROR)

    async def _share_partition(self, group_id: str, partition: Partition, settings: ShareSettings) -> SharePartition:
        key = self._key(group_id, partition)
        tp = partition.topic_partition
        found = self.partitions.get(key)
        while found is None:
            saved, drops, state_epoch = await self._read_state(group_id, partition)
            start = None if saved is not None else await self._initial_offset(partition, settings.reset)
            if drops != self._drops:  # dropped meanwhile (DeleteShareGroupOffsets, leadership): read again
                found = self.partitions.get(key)
                continue
            partition.check_leader()
            found = self.partitions.get(key)  # another fetch may have made it meanwhile
            if found is None:
                if saved is not None:
                    found = saved
                    log.info("share-partition state read back", group=group_id, partition=str(tp),
                             start_offset=found.start_offset)
                else:
                    assert start is not None
                    found = SharePartition(start, released=lambda: self._released(group_id, partition))
                    found.state_epoch = state_epoch
                    log.info("share-partition initialised", group=group_id, partition=str(tp), start_offset=start)
                self._put(key, partition, found)
        found.move_start(partition.log_start_offset)
        return found

    def _released(self, group_id: str, partition: Partition) -> None:
        """Records went back to Available (a lock expired, a session ended): a parked ShareFetch may take
        them, and the stored state follows."""
        self._replicas.fetches.notify(partition.topic_partition)
        partition.log.io.spawn(self._persist_released(group_id, partition), "share-partition state")

    async def persist(self, group_id: str, partition: Partition, share: SharePartition | None = None) -> None:
        """Store the share-partition's state as it is now (after acknowledgements: stored on return).
        `share`: the one the caller changed; when it is no longer this broker's (its replica stopped
        leading or was forgotten, or it was replaced) nothing is written and ShareStateError
        NOT_LEADER_OR_FOLLOWER says the change is lost (the records go back to their new leader's
        state). Without `share`, a share-partition dropped meanwhile writes nothing. ShareStateError
        when the coordinator refused the write or cannot be had (its error as `persister_error` maps it)."""
        key = self._key(group_id, partition)
        try:
            async with self._writing.held(key):
                current = self.partitions.get(key)
                if share is not None and (current is not share or self._owners.get(key) is not partition):
                    raise ShareStateError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                share = current
                if share is not None and self._owners.get(key) is partition:
                    await self.persister.write(key, share.state_epoch, partition.leader_epoch, share.start_offset,
                                               share.state_batches())
        except PersisterError as exc:
            if exc.error_code in _STATE_GONE and self.partitions.get(key) is share:
                self._drop(key)  # reset or deleted by the admin APIs meanwhile: the next fetch reads it again
            raise ShareStateError(persister_error(exc.error_code)) from None

    async def _persist_released(self, group_id: str, partition: Partition) -> None:
        with contextlib.suppress(ShareStateError):  # told and logged: nobody waits on this write
            await self.persist(group_id, partition)

    async def _initial_offset(self, partition: Partition, reset: str) -> int:
        if reset == "earliest":
            return partition.log_start_offset
        if reset.startswith("by_duration:"):
            match = _DURATION.fullmatch(reset[len("by_duration:"):])
            assert match is not None  # group_configs.py checked it
            days, hours, minutes, seconds = (float((g or "0").replace(",", ".")) for g in match.groups())
            back_ms = int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)
            found = await self._replicas.run_io(partition.log.offset_for_timestamp, int(time.time() * 1000) - back_ms)
            return partition.high_watermark if found is None else min(found.offset, partition.high_watermark)
        if reset != "latest":
            raise ValueError(f"share.auto.offset.reset {reset!r}")
        return partition.high_watermark

    def _bound(self, partition: Partition, settings: ShareSettings) -> int:
        return partition.last_stable_offset if settings.read_committed else partition.high_watermark

    def ready_now(self, group_id: str, partition: Partition, settings: ShareSettings) -> bool:
        """Whether a fetch would find something to acquire now (a parked ShareFetch asks)."""
        share = self.share_partition(group_id, partition)
        if share is None:
            return True
        return share.has_available() or self._bound(partition, settings) > share.end_offset

    async def fetch(self, group_id: str, member_id: str, partition: Partition, settings: ShareSettings,
                    max_bytes: int, max_records: int) -> PartitionRead:
        key = self._key(group_id, partition)
        try:
            partition.check_leader()
            share = await self._share_partition(group_id, partition, settings)
            offset = share.next_fetch_offset()
            bound = self._bound(partition, settings)
            if offset >= bound or max_records <= 0:
                return PartitionRead()
            read = partition.log.read(offset, max(1, max_bytes), max_offset=bound)
            aborted = partition.aborted_transactions(offset, read.next_offset) \
                if settings.read_committed and read.slices else []
        except (PartitionError, LogError) as exc:
            return PartitionRead(error=exc.error_code)
        except StateReadError as exc:  # nothing kept: the next ShareFetch reads again, as Kafka's
            return PartitionRead(error=persister_error(exc.error_code))
        except ShareStateError as exc:
            return PartitionRead(error=exc.error_code)
        if not read.slices:
            return PartitionRead()
        [data] = await self._replicas.read_slices([read.slices])
        if self.partitions.get(key) is not share:  # replaced or dropped during the read: acquire nothing
            return PartitionRead()
        spans = _batches(data, aborted)
        taken, acquired = share.acquire(member_id, [batch for batch, _ in spans], max_records, settings.limits)
        if not acquired:
            return PartitionRead()
        return PartitionRead(b"".join(data[spans[i][1]] for i in taken), tuple(acquired))  # one copy

    # --- the admin APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets) ---

    async def stored(self, group_id: str, partition: Partition) -> SharePartition | None:
        """The group's share-partition: in memory, else read back from its share coordinator, else None
        (no state, or none with a start offset yet)."""
        key = self._key(group_id, partition)
        found = self.partitions.get(key)
        while found is None:
            try:
                saved, drops, _ = await self._read_state(group_id, partition)
            except Uninitialized:
                return None
            if drops != self._drops:
                found = self.partitions.get(key)
                continue
            found = self.partitions.get(key)
            if found is None and saved is not None and partition.is_leader:
                found = self._put(key, partition, saved)
            break
        return found

    async def described(self, group_id: str, wanted: list[tuple[Topic, int]]) -> dict[tuple[str, int], Described]:
        """(start offset, leader epoch, lag) of each of the group's partitions named (topic, index),
        wherever it is led: here, from the share-partition in memory or read back; elsewhere, from its
        share coordinator's summary (nothing kept; one ask per coordinator for all of them). None: no
        state; an ErrorCode: its coordinator could not be had. The lag is -1 where this broker has no
        replica of the partition (no high watermark to count to)."""
        found: dict[tuple[str, int], Described] = {}
        elsewhere: dict[StateKey, tuple[tuple[str, int], Partition | None]] = {}
        for topic, index in wanted:
            partition = None
            with contextlib.suppress(PartitionError):
                partition = self._replicas.partition_of(topic, index)
            if partition is not None and partition.is_leader:
                try:
                    share = await self.stored(group_id, partition)
                except ShareStateError as exc:
                    found[(topic.name, index)] = exc.error_code
                    continue
                found[(topic.name, index)] = None if share is None else (
                    share.start_offset, partition.leader_epoch, lag(share, partition.high_watermark))
            else:
                elsewhere[(group_id, topic.topic_id, index)] = ((topic.name, index), partition)
        summaries = await self.persister.summaries(list(elsewhere))
        for key, (where, partition) in elsewhere.items():
            summary = summaries[key]
            found[where] = summary if isinstance(summary, ErrorCode) else _from_summary(summary, partition)
        return found

    async def group_state(self, group_id: str, topics: list[Topic]) -> dict[tuple[str, int], Described]:
        """`described` of a group's partitions with state, over every partition of `topics`;
        ShareStateError when a coordinator could not be had."""
        described = await self.described(group_id, [(t, i) for t in topics for i in sorted(t.replicas)])
        for state in described.values():
            if isinstance(state, ErrorCode):
                raise ShareStateError(state)
        return {where: state for where, state in described.items() if state is not None}

    async def set_starts(self, group_id: str, state_epoch: int, starts: dict[tuple[uuid.UUID, int], int]
                         ) -> dict[tuple[uuid.UUID, int], ErrorCode]:
        """AlterShareGroupOffsets: these share-partitions (topic id, partition -> start offset) start again,
        nothing in flight, initialized by their share coordinators under `state_epoch` (the group's epoch,
        as Kafka's group coordinator asks); a leader here drops what it holds and reads the state again.
        Each one's error (NONE: set)."""
        keys = {(group_id, topic_id, index): offset for (topic_id, index), offset in starts.items()}
        self._drops += 1  # a read under way is of the old state
        errors = await self.persister.initialize_at(state_epoch, keys)
        for key, error in errors.items():
            self._drop(key)
            if error == ErrorCode.NONE:
                log.info("share-partition start offset set", group=group_id, topic_id=str(key[1]),
                         partition=key[2], start_offset=keys[key])
        return {(topic_id, index): error for (_, topic_id, index), error in errors.items()}

    async def forget(self, group_id: str, topics: Mapping[uuid.UUID, tuple[str, Iterable[int]]]
                     ) -> dict[uuid.UUID, ErrorCode]:
        """The group coordinator's deletion of share-partitions' states (DeleteShareGroupOffsets, a deleted
        group: topic id -> (name, partitions)): in memory here and with the share coordinator (and an older
        Ebb's state file on a leader here); a later fetch starts from the reset rule. Returns each topic's
        error: NONE, or the first error of a partition whose stored state could not be deleted (it stays;
        the other partitions are still tried), as Kafka's persister answers per topic."""
        errors: dict[uuid.UUID, ErrorCode] = {}
        for topic_id, (name, indexes) in topics.items():
            errors[topic_id] = ErrorCode.NONE
            for index in sorted(indexes):
                key = (group_id, topic_id, index)
                self._drops += 1  # a state being read now is about to go: that read must not be kept
                self._drop(key)
                try:
                    await self.persister.delete(key)
                except PersisterError as exc:  # logged by the persister
                    if errors[topic_id] == ErrorCode.NONE:
                        errors[topic_id] = exc.error_code
                self._drops += 1  # and one begun while it went
                with contextlib.suppress(PartitionError):
                    partition = self._replicas.partition(name, index)
                    if partition.topic_id != topic_id:
                        continue  # the name is another topic's now
                    try:
                        await partition.log.io.remove_files([_state_path(group_id, partition)])
                    except OSError as exc:
                        log.warning("share-partition state file not removed", group=group_id, error=repr(exc))
        return errors

    def member_left(self, group_id: str, member_id: str) -> None:
        """The member left its share group or its session timed out (Kafka's ShareGroupListener): its
        share sessions end and what it holds here goes back to the others."""
        session = self.sessions.sessions.get((group_id, member_id))
        if session is not None:
            self.sessions.close(session)
        for (group, _, _), share in list(self.partitions.items()):
            if group == group_id:
                share.release_member(member_id, share.delivery_limit)

    def disconnected(self, session: ShareSession) -> None:
        """The connection that opened `session` closed (Kafka's connection-disconnect listener): if the
        cache still holds it, it ends and what its member holds here goes back to the others."""
        if self.sessions.sessions.get((session.group_id, session.member_id)) is session:
            self.member_left(session.group_id, session.member_id)

    def end_session(self, group_id: str, member_id: str, partitions: list[Partition], delivery_limit: int) -> None:
        """The member's share session closed: what it holds on these partitions is released."""
        for partition in partitions:
            share = self.share_partition(group_id, partition)
            if share is not None:
                share.release_member(member_id, delivery_limit)


def lag(share: SharePartition, high_watermark: int) -> int:
    """Records from the start offset up to the high watermark not finished with (KIP-1226)."""
    return max(0, high_watermark - share.start_offset - share.finished_in_flight())


def _state_path(group_id: str, partition: Partition) -> Path:
    """A name of bounded length for any group id (ids run to 32,767 bytes); the file names its group."""
    return partition.log.directory / f"share-{hashlib.sha256(group_id.encode()).hexdigest()[:32]}.state"


def _checked(saved: bytes | None, group_id: str, partition: Partition) -> bytes | None:
    """A state file's bytes if they restore for this group; else None (logged): the share-partition starts
    again from share.auto.offset.reset rather than failing every fetch."""
    if saved is None:
        return None
    try:
        SharePartition.restore(saved, group_id, released=lambda: None)
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("share-partition state file unreadable: starting afresh", group=group_id,
                    partition=str(partition.topic_partition), error=str(exc))
        return None
    return saved


def _read_if_there(path: Path) -> bytes | None:
    """Blocking (the I/O pool): a state file's bytes, or None when there is none."""
    with contextlib.suppress(FileNotFoundError):
        with open(path, "rb") as f:
            return f.read()
    return None


def _batches(data: memoryview, aborted: list[AbortedTxn]) -> list[tuple[Batch, slice]]:
    """The batches of a read as their headers tell them (records are not looked at), with where each lies.

    `aborted`: the aborted transactions the read overlaps (read_committed; else none). A transactional
    data batch is aborted when its producer has one that began at or before the batch's last offset and
    whose ABORT marker lies after the batch: Kafka's rule over the same list, which walks to the marker;
    the index holds the marker's offset, so no marker is decoded."""
    out = []
    pending = sorted(aborted, key=lambda txn: txn.first_offset, reverse=True)  # pop() takes the earliest
    begun: dict[int, int] = {}  # producer id -> the ABORT marker's offset of its transaction begun so far
    position, end = 0, len(data)
    while position + LOG_OVERHEAD <= end:
        base, length = _FRAME.unpack_from(data, position)
        size = LOG_OVERHEAD + length
        if position + size > end:
            break  # a partial batch at the end of a read is not sent
        last = base + _INT.unpack_from(data, position + LAST_OFFSET_DELTA_AT)[0]
        is_aborted = False
        if pending or begun:
            while pending and pending[-1].first_offset <= last:
                txn = pending.pop()
                begun[txn.producer_id] = txn.last_offset
            attributes = _SMALL.unpack_from(data, position + ATTRIBUTES_AT)[0]
            if attributes & TRANSACTIONAL_BIT and not attributes & CONTROL_BIT:
                marker = begun.get(_LONG.unpack_from(data, position + PRODUCER_ID_AT)[0])
                is_aborted = marker is not None and base < marker
        out.append((Batch(base, last, is_aborted), slice(position, position + size)))
        position += size
    return out



def _from_summary(summary: Summary | None, partition: Partition | None) -> tuple[int, int, int] | None:
    """(start offset, leader epoch, lag) from a share coordinator's summary (None: no state)."""
    if summary is None or summary[2] < 0:
        return None
    _, leader_epoch, start, finished = summary
    # the summary's leader epoch is the last leader's that read or wrote; a replica here knows the partition's
    epoch = leader_epoch if leader_epoch >= 0 or partition is None else partition.leader_epoch
    return start, epoch, -1 if partition is None else max(0, partition.high_watermark - start - max(finished, 0))
