"""SharePartition (broker/share/partition.py): where a fetch reads from as records are acquired,
released and restored, without scanning the records in flight when none can be Available."""

from __future__ import annotations

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
