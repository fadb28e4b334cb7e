"""One share-partition (KIP-932's SharePartition): what a share group has delivered of one topic
partition, kept by the partition's leader.

The share-partition start offset (SPSO) is the first offset not yet finished with; the end offset
(SPEO) the first never acquired. Between them each offset is in flight, in one of Kafka's states:

    Available     may be given to a member (released, or its lock expired)
    Acquired      locked to one member until it acknowledges or the lock expires
                  (share.record.lock.duration.ms)
    Acknowledged  accepted by the member: done
    Archived      rejected (a consumer acknowledges the offsets of control batches, which it is
                  given as Kafka gives them, as gaps), or delivered share.delivery.count.limit times,
                  or an aborted transaction's under share.isolation.level=read_committed (acquired,
                  then archived at once: Kafka's SharePartition counts that delivery), or an offset
                  the log no longer has: done

The SPSO moves past the finished prefix. The state is kept per offset (Kafka keeps ranges per batch
while it can; the answer is the same). `snapshot()` is what survives a restart (broker/share/manager.py
writes it): the SPSO, the end offset, and each offset in flight with its delivery count, Acquired ones
written as Available (their locks do not survive).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from protocol.enums import AcknowledgeType
from protocol.errors import CodedError, ErrorCode

MAX_DELIVERY_COUNT = 32767  # the answer's DeliveryCount is an int16


class RecordState(IntEnum):
    """Kafka's RecordState ids (its share-group state records carry them, as Ebb's do: broker/share/state_log.py)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class ShareError(CodedError):
    """A share fetch or acknowledgement refused with a Kafka error code."""


@dataclass(eq=False, slots=True)
class _Lock:
    """One acquisition's timer, shared by the records it acquired (one timer per fetch, not per record)."""

    offsets: list[int]
    handle: asyncio.TimerHandle | None = None
    holders: int = 0  # records still locked by it; the timer is cancelled when none is


@dataclass(eq=False, slots=True)
class _InFlight:
    state: RecordState
    delivery_count: int
    member: str | None = None
    lock: _Lock | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    """A stored batch as its header tells it: offsets [base, last], and whether it is data of an aborted
    transaction that a read_committed fetch must not deliver (broker/share/manager.py decides)."""

    base: int
    last: int
    aborted: bool = False


@dataclass(frozen=True, slots=True)
class Acquired:
    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareLimits:
    lock_ms: int
    delivery_limit: int
    max_locks: int  # share.partition.max.record.locks: offsets in flight at most


class SharePartition:
    def __init__(self, start_offset: int, released: Callable[[], None] = lambda: None) -> None:
        """`released` is told when records become Available again (a waiting ShareFetch may take them)."""
        self.start_offset = start_offset
        self.end_offset = start_offset
        self._records: dict[int, _InFlight] = {}
        self._released = released
        self.delivery_limit = 2**15  # the group's share.delivery.count.limit as its last fetch used it
        self.state_epoch = 0  # the stored state's epoch it came from: the admin APIs' resets bump it
        # False once a scan found nothing Available, until a release (Kafka's findNextFetchOffset): a
        # fetch then reads from the end offset without scanning every record in flight.
        self._maybe_available = False

    # --- acquiring ---------------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where a fetch reads from: the first Available offset in flight, else the end offset."""
        if self._maybe_available:
            available = [o for o, r in self._records.items() if r.state is RecordState.AVAILABLE]
            if available:
                return min(available)
            self._maybe_available = False
        return self.end_offset

    def finished_in_flight(self) -> int:
        """Offsets past the start offset already Acknowledged or Archived."""
        return sum(r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED) for r in self._records.values())

    def has_available(self) -> bool:
        if self._maybe_available:
            self._maybe_available = any(r.state is RecordState.AVAILABLE for r in self._records.values())
        return self._maybe_available

    def acquire(self, member: str, batches: list[Batch], max_records: int, limits: ShareLimits
                ) -> tuple[list[int], list[Acquired]]:
        """Acquire for `member` what `batches` (read from `next_fetch_offset()`) hold that is Available or
        new, whole batches at a time, until max_records or the in-flight limit. Returns the indexes of
        the batches to send and the acquired ranges. The offsets of aborted batches are acquired (they
        count towards max_records, and their delivery counts grow) and then archived, as Kafka's
        SharePartition does: they are neither sent nor in the ranges."""
        self.delivery_limit = limits.delivery_limit
        taken: list[int] = []
        acquired: list[tuple[int, int]] = []  # (offset, delivery count)
        lock = _Lock([])
        any_available = self.has_available()  # only falls while acquiring
        for index, batch in enumerate(batches):
            if len(acquired) >= max_records or (
                    self.end_offset - self.start_offset >= limits.max_locks and not any_available):
                break
            got = False
            for offset in range(max(batch.base, self.start_offset), batch.last + 1):
                record = self._records.get(offset)
                if offset >= self.end_offset:
                    record = self._records[offset] = _InFlight(RecordState.AVAILABLE, 0)
                if record is None or record.state is not RecordState.AVAILABLE:
                    continue
                record.state, record.member, record.lock = RecordState.ACQUIRED, member, lock
                record.delivery_count = min(record.delivery_count + 1, MAX_DELIVERY_COUNT)
                lock.offsets.append(offset)
                acquired.append((offset, record.delivery_count))
                got = True
            self.end_offset = max(self.end_offset, batch.last + 1)
            if got:
                taken.append(index)
        if any(batch.aborted for batch in batches):
            archived = self._archive_aborted(batches, lock)
            taken = [i for i in taken if not batches[i].aborted]
            acquired = [(offset, count) for offset, count in acquired if offset not in archived]
        if lock.offsets:
            lock.holders = len(lock.offsets)
            lock.handle = asyncio.get_running_loop().call_later(limits.lock_ms / 1000, self._expire, lock,
                                                                limits.delivery_limit)
        self._advance()
        return taken, _ranges(acquired)

    def _archive_aborted(self, batches: list[Batch], lock: _Lock) -> set[int]:
        """Every Acquired offset of the aborted batches becomes Archived (Kafka's rule: whoever holds it);
        returns those the acquisition under way (`lock`, not yet timed) had taken."""
        archived: set[int] = set()
        for batch in batches:
            if not batch.aborted:
                continue
            for offset in range(max(batch.base, self.start_offset), batch.last + 1):
                record = self._records.get(offset)
                if record is None or record.state is not RecordState.ACQUIRED:
                    continue
                if record.lock is lock:
                    record.lock = None
                    archived.add(offset)
                else:
                    _unlock(record)
                record.state, record.member = RecordState.ARCHIVED, None
        if archived:
            lock.offsets = [offset for offset in lock.offsets if offset not in archived]
        return archived

    def _expire(self, lock: _Lock, delivery_limit: int) -> None:
        lock.handle = None
        expired = False
        for offset in lock.offsets:
            record = self._records.get(offset)
            if record is not None and record.lock is lock and record.state is RecordState.ACQUIRED:
                self._release(record, delivery_limit)
                expired = True
        if expired:
            self._advance()
            self._released()

    # --- acknowledging ------------------------------------------------------------------------------

    def acknowledge(self, member: str, first: int, last: int, types: list[int], limits: ShareLimits,
                    *, renew_allowed: bool) -> None:
        """One AcknowledgementBatch (see acknowledge_all)."""
        self.acknowledge_all(member, [(first, last, types)], limits, renew_allowed=renew_allowed)

    def acknowledge_all(self, member: str, batches: list[tuple[int, int, list[int]]], limits: ShareLimits,
                        *, renew_allowed: bool) -> None:
        """A partition's AcknowledgementBatches, all or none: ShareError (INVALID_REQUEST,
        INVALID_RECORD_STATE) for the first batch refused, and then none is applied (Kafka 4.3.1's
        SharePartition.acknowledge rolls back the batches before it)."""
        finished: set[int] = set()  # offsets an earlier batch of the request finishes
        checked = [self._checked(member, first, last, types, renew_allowed, finished) for first, last, types in batches]
        released = False
        for first, last, kinds, skipped in checked:
            for i, offset in enumerate(range(first, last + 1), start=skipped):
                kind = kinds[0] if len(kinds) == 1 else kinds[i]
                released = self._apply(self._records[offset], offset, kind, limits) or released
        self._advance()
        if released:
            self._released()

    def _checked(self, member: str, first: int, last: int, types: list[int], renew_allowed: bool,
                 finished: set[int]) -> tuple[int, int, list[AcknowledgeType], int]:
        """One batch's offsets to apply (past the start offset: those before are done, Kafka answers
        NONE), its types and how many offsets were skipped; ShareError when it cannot be applied."""
        count = last - first + 1
        if first < 0 or count <= 0 or len(types) not in (1, count):
            raise ShareError(ErrorCode.INVALID_REQUEST, f"bad acknowledgement batch [{first}, {last}] with "
                                                        f"{len(types)} types")
        kinds = []
        for t in types:
            if t not in AcknowledgeType._value2member_map_ or (t == AcknowledgeType.RENEW and not renew_allowed):
                raise ShareError(ErrorCode.INVALID_REQUEST, f"unknown acknowledge type {t}")
            kinds.append(AcknowledgeType(t))
        start = max(first, self.start_offset)
        for i, offset in enumerate(range(start, last + 1), start=start - first):
            record = self._records.get(offset)
            if (record is None or record.state is not RecordState.ACQUIRED or record.member != member
                    or offset in finished):
                raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                 f"offset {offset} is not acquired by member {member}")
            if (kinds[0] if len(kinds) == 1 else kinds[i]) is not AcknowledgeType.RENEW:
                finished.add(offset)
        return start, last, kinds, start - first

    def _apply(self, record: _InFlight, offset: int, kind: AcknowledgeType, limits: ShareLimits) -> bool:
        """One offset's acknowledgement; True when it became Available again."""
        _unlock(record)
        if kind is AcknowledgeType.RENEW:  # a lock of its own from now
            renewed = record.lock = _Lock([offset], holders=1)
            renewed.handle = asyncio.get_running_loop().call_later(limits.lock_ms / 1000, self._expire, renewed,
                                                                   limits.delivery_limit)
            return False
        record.member = None
        if kind is AcknowledgeType.ACCEPT:
            record.state = RecordState.ACKNOWLEDGED
        elif kind is AcknowledgeType.RELEASE:
            self._release(record, limits.delivery_limit)
            return record.state is RecordState.AVAILABLE
        else:  # REJECT, and GAP: an offset the batch did not hold
            record.state = RecordState.ARCHIVED
        return False

    def release_member(self, member: str, delivery_limit: int) -> None:
        """The member's share session ended: what it still holds goes back to the others."""
        released = False
        for record in self._records.values():
            if record.state is RecordState.ACQUIRED and record.member == member:
                self._release(record, delivery_limit)
                released = True
        self._advance()
        if released:
            self._released()

    def _release(self, record: _InFlight, delivery_limit: int) -> None:
        _unlock(record)
        record.member = None
        record.state = RecordState.ARCHIVED if record.delivery_count >= delivery_limit else RecordState.AVAILABLE
        self._maybe_available = self._maybe_available or record.state is RecordState.AVAILABLE

    def _advance(self) -> None:
        while self.start_offset < self.end_offset:
            record = self._records.get(self.start_offset)
            if record is not None and record.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            self._records.pop(self.start_offset, None)
            self.start_offset += 1

    def move_start(self, offset: int) -> None:
        """The log start offset passed the SPSO (retention, DeleteRecords): those offsets are gone."""
        if offset <= self.start_offset:
            return
        for o in [o for o in self._records if o < offset]:
            _unlock(self._records.pop(o))
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)

    def snapshot(self, group_id: str) -> bytes:
        in_flight = [[o, int(RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state), r.delivery_count]
                     for o, r in sorted(self._records.items())]
        return json.dumps({"version": 0, "group": group_id, "start": self.start_offset, "end": self.end_offset,
                           "records": in_flight}, separators=(",", ":")).encode()

    def state_batches(self) -> tuple[tuple[int, int, int, int], ...]:
        """The in-flight offsets as Kafka's state batches: (first, last, state, delivery count) ranges of
        consecutive offsets alike, Acquired written as Available (locks do not survive a move)."""
        out: list[list[int]] = []
        for offset, record in sorted(self._records.items()):
            state = int(RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state)
            last = out[-1] if out else None
            if last is not None and last[1] + 1 == offset and last[2] == state and last[3] == record.delivery_count:
                last[1] = offset
            else:
                out.append([offset, offset, state, record.delivery_count])
        return tuple((f, la, st, c) for f, la, st, c in out)

    @classmethod
    def from_state(cls, start_offset: int, batches: tuple[tuple[int, int, int, int], ...],
                   released: Callable[[], None], state_epoch: int = 0, *, limit: int) -> SharePartition:
        """A share-partition as its stored state says (the start offset, the state batches): the end
        offset follows the last batch, and the log past it is new. Offsets at or past `limit` (the
        log end: no record there yet) are not kept, so a stored range is never expanded past the log."""
        share = cls(start_offset, released)
        share.state_epoch = state_epoch
        for first, last, state, count in batches:
            last = min(last, limit - 1)
            if last < max(first, start_offset):
                continue
            for offset in range(max(first, start_offset), last + 1):
                kind = RecordState(state)  # Acquired is never stored: its lock is gone
                share._records[offset] = _InFlight(RecordState.AVAILABLE if kind is RecordState.ACQUIRED else kind,
                                                   count)
            share.end_offset = max(share.end_offset, last + 1)
        share._maybe_available = bool(share._records)
        share._advance()
        return share

    @classmethod
    def restore(cls, data: bytes, group_id: str, released: Callable[[], None]) -> SharePartition:
        state = json.loads(data)
        if state.get("version") != 0 or state.get("group") != group_id:
            raise ValueError(f"share-partition state of version {state.get('version')!r}, group "
                             f"{state.get('group')!r}: not {group_id!r}'s")
        share = cls(int(state["start"]), released)
        share.end_offset = int(state["end"])
        for offset, kind, count in state["records"]:
            share._records[int(offset)] = _InFlight(RecordState(kind), int(count))
        share._maybe_available = True
        return share

    def close(self) -> None:
        for record in self._records.values():
            _unlock(record)
        self._records.clear()


def _unlock(record: _InFlight) -> None:
    """The record no longer holds its lock; the lock's timer goes with its last record."""
    lock, record.lock = record.lock, None
    if lock is not None:
        lock.holders -= 1
        if lock.holders <= 0 and lock.handle is not None:
            lock.handle.cancel()
            lock.handle = None


def _ranges(acquired: list[tuple[int, int]]) -> list[Acquired]:
    """Consecutive offsets with one delivery count make one range."""
    out: list[Acquired] = []
    for offset, count in acquired:
        if out and out[-1].last + 1 == offset and out[-1].delivery_count == count:
            out[-1] = Acquired(out[-1].first, offset, count)
        else:
            out.append(Acquired(offset, offset, count))
    return out
