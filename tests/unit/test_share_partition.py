"""SharePartition (broker/share/partition.py): where a fetch reads from as records are acquired,
released and restored, without scanning the records in flight when none can be Available; its state
as Kafka's state batches, and the `__share_group_state` records and keys (broker/share/state_log.py)."""

from __future__ import annotations

import pytest

from broker.share.partition import Batch, ShareLimits, SharePartition

LIMITS = ShareLimits(lock_ms=30_000, delivery_limit=5, max_locks=1000)


class _Counting(dict):
    """The in-flight records, counting the scans over them."""

    scans = 0

    def items(self):
        self.scans += 1
        return super().items()

    def values(self):
        self.scans += 1
        return super().values()


async def test_the_next_fetch_offset_follows_releases_without_needless_scans():
    share = SharePartition(0)
    share._records = records = _Counting()
    share.acquire("m", [Batch(0, 9, False)], 100, LIMITS)
    before = records.scans
    assert (share.next_fetch_offset(), share.has_available()) == (10, False)
    assert records.scans == before  # nothing was released: the end offset, no scan
    share.acknowledge("m", 3, 4, [2], LIMITS, renew_allowed=False)  # release 3-4
    assert (share.next_fetch_offset(), share.has_available()) == (3, True)
    share.acquire("n", [Batch(0, 9, False)], 100, LIMITS)
    assert (share.next_fetch_offset(), share.has_available()) == (10, False)
    scanned = records.scans
    assert share.next_fetch_offset() == 10 and records.scans == scanned
    share.close()


def test_a_restored_share_partition_finds_its_available_records():
    restored = SharePartition.restore(
        b'{"version":0,"group":"g","start":0,"end":4,"records":[[0,2,1],[1,0,1],[2,0,1],[3,2,1]]}', "g",
        released=lambda: None)
    assert (restored.next_fetch_offset(), restored.has_available()) == (1, True)


async def test_state_batches_round_trip_as_the_share_coordinator_stores_them():
    share = SharePartition(0)
    share.acquire("m", [Batch(0, 9, False)], 100, LIMITS)
    share.acknowledge("m", 0, 1, [1], LIMITS, renew_allowed=False)  # accept 0-1: the start moves to 2
    share.acknowledge("m", 2, 3, [2], LIMITS, renew_allowed=False)  # release 2-3
    share.acknowledge("m", 6, 6, [3], LIMITS, renew_allowed=False)  # reject 6
    batches = share.state_batches()  # 4-5 and 7-9 still acquired: written Available
    assert (share.start_offset, batches) == (2, ((2, 5, 0, 1), (6, 6, 4, 1), (7, 9, 0, 1)))
    again = SharePartition.from_state(share.start_offset, batches, released=lambda: None, state_epoch=3, limit=10)
    assert (again.start_offset, again.end_offset, again.next_fetch_offset(), again.state_epoch) == (2, 10, 2, 3)
    assert again.state_batches() == batches
    share.close()
    # a range past the log end (a WriteShareGroupState of 0..2^62) is kept only up to it, at once
    huge = SharePartition.from_state(2, ((2, 5, 0, 1), (6, 2**62, 4, 1), (2**62 + 5, 2**63 - 1, 0, 1)),
                                     released=lambda: None, limit=12)
    assert (huge.start_offset, huge.end_offset, huge.state_batches()) == (2, 12, ((2, 5, 0, 1), (6, 11, 4, 1)))


def test_state_records_and_keys_in_kafkas_layout():
    import uuid

    from broker.group.offsets_store import java_string_hash
    from broker.share.state_log import (
        ShareState,
        coordinator_key,
        key_bytes,
        parse_coordinator_key,
        parse_record,
        partition_of,
        value_bytes,
    )

    key = ("g:x", uuid.UUID(int=1), 3)
    assert coordinator_key(key) == "g:x:AAAAAAAAAAAAAAAAAAAAAQ:3"  # Kafka's Uuid.toString
    assert parse_coordinator_key(coordinator_key(key)) == key
    assert partition_of(key, 50) == abs(java_string_hash("g:x:AAAAAAAAAAAAAAAAAAAAAQ:3")) % 50
    state = ShareState(2, 5, 10, ((10, 12, 0, 1), (13, 13, 4, 3)), 1_700_000_000_000, 7)
    assert key_bytes(key)[:2] == b"\x00\x00"  # record type 0: ShareSnapshot
    assert parse_record(key_bytes(key), value_bytes(state, 1_700_000_000_001)) == (key, state)
    for bad in ("no-colons", "g:not-an-id:0", "g:AAAAAAAAAAAAAAAAAAAAAQ:x", " :AAAAAAAAAAAAAAAAAAAAAQ:0"):
        with pytest.raises(ValueError):
            parse_coordinator_key(bad)


async def test_aborted_batches_are_acquired_then_archived_and_markers_are_acquired_like_records():
    """Kafka 4.3.1's acquisition under read_committed: a plain record (0), an aborted transaction's
    two batches (1-2, 3-4) and its marker (5), a committed one (6-7) and its marker (8), a plain record
    (9). The aborted offsets count one delivery and are archived; the markers are acquired (the
    consumer acknowledges them as gaps)."""
    share = SharePartition(0)
    batches = [Batch(0, 0), Batch(1, 2, aborted=True), Batch(3, 4, aborted=True), Batch(5, 5), Batch(6, 7),
               Batch(8, 8), Batch(9, 9)]
    taken, acquired = share.acquire("m", batches, 100, LIMITS)
    assert taken == [0, 3, 4, 5, 6]
    assert [(a.first, a.last, a.delivery_count) for a in acquired] == [(0, 0, 1), (5, 9, 1)]
    assert share.state_batches() == ((0, 0, 0, 1), (1, 4, 4, 1), (5, 9, 0, 1))  # Acquired written Available
    assert share.finished_in_flight() == 4
    share.acknowledge("m", 0, 0, [1], LIMITS, renew_allowed=False)  # the start moves past the archived too
    assert (share.start_offset, share.state_batches()) == (5, ((5, 9, 0, 1),))
    share.acknowledge("m", 5, 9, [1], LIMITS, renew_allowed=False)
    assert (share.start_offset, share.next_fetch_offset()) == (10, 10)


async def test_aborted_records_count_towards_max_records_and_a_holder_loses_them():
    share = SharePartition(0)
    taken, acquired = share.acquire("m", [Batch(0, 1, aborted=True), Batch(2, 3), Batch(4, 5)], 3, LIMITS)
    assert (taken, [(a.first, a.last) for a in acquired]) == ([1], [(2, 3)])  # 0-1 counted: no room for 4-5
    assert share.start_offset == 2 and share.end_offset == 4
    # records another member acquired before (the group read uncommitted then) are archived as Kafka does
    other = SharePartition(0)
    other.acquire("n", [Batch(0, 3)], 100, LIMITS)
    taken, acquired = other.acquire("m", [Batch(0, 3, aborted=True)], 100, LIMITS)
    assert (taken, acquired, other.start_offset) == ([], [], 4)
    share.close()
    other.close()


async def test_an_all_aborted_fetch_acquires_nothing_and_sets_no_lock():
    share = SharePartition(0)
    assert share.acquire("m", [Batch(0, 4, aborted=True)], 100, LIMITS) == ([], [])
    assert (share.start_offset, share.end_offset, share.state_batches()) == (5, 5, ())
