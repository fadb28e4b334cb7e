"""The leader epoch cache of one partition: which epoch's leader wrote from which offset on.

Persisted as `leader-epoch-checkpoint` (version 0, "<epoch> <start offset>" lines). The batches
carry their epoch too, so recovery can re-derive the entries for the part of the log it rescans.
"""

from __future__ import annotations

from bisect import bisect_right

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self._entries: list[tuple[int, int]] = list(entries or [])
        self.dirty = False

    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def epoch_at(self, offset: int) -> int:
        """The epoch whose range holds `offset` (UNDEFINED_EPOCH before the first entry)."""
        i = bisect_right([start for _, start in self._entries], offset) - 1
        return self._entries[i][0] if i >= 0 else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Note that `epoch` starts at `start_offset`; entries it contradicts are dropped."""
        if epoch < 0:
            return
        if self._entries and self._entries[-1][0] == epoch:
            return
        self._entries = [(e, o) for e, o in self._entries if e < epoch and o < start_offset]
        self._entries.append((epoch, start_offset))
        self.dirty = True

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after `end_offset` (the log was truncated there)."""
        kept = [(e, o) for e, o in self._entries if o < end_offset]
        if kept != self._entries:
            self._entries = kept
            self.dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly below `start_offset`; the one spanning it now starts there."""
        i = bisect_right([start for _, start in self._entries], start_offset) - 1
        if i < 0:
            return
        epoch, start = self._entries[i]
        kept = [(epoch, max(start, start_offset))] + self._entries[i + 1 :]
        if kept != self._entries:
            self._entries = kept
            self.dirty = True

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self.dirty = True

    def start_offset_of(self, epoch: int, default: int) -> int:
        """Where `epoch` starts in this log; `default` when it has no entry."""
        return next((start for e, start in self._entries if e == epoch), default)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Where `epoch` ends, as OffsetsForLeaderEpoch answers (Kafka's endOffsetFor): the latest epoch
        ends at the log end; an older one where the next epoch starts, reported under the largest
        epoch at or below it (or itself, when it is below every epoch known); an epoch above every
        epoch known, or UNDEFINED, has no end (UNDEFINED, UNDEFINED)."""
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.latest_epoch:
            return epoch, log_end_offset
        higher = next(((e, start) for e, start in self._entries if e > epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = [e for e, _ in self._entries if e <= epoch]
        return (floor[-1] if floor else epoch), higher[1]
        for i, (e, _) in enumerate(self._entries):
            if e > epoch:
                return self._entries[i - 1][0], self._entries[i][1]
        return self.latest_epoch, log_end_offset
