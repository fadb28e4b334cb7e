"""The partitions of a log dir that are not loaded: why, the checkpoint entries they had (kept, so
that rewriting the dir's checkpoints does not forget their state), and which of them the dir's
health probe loads again (a failure of the disk; a corrupt log would fail the same way again)."""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from broker.log.checkpoint_file import Offsets
from broker.log.common import TopicPartition
from broker.resolve_generation import RESOLVE_GENERATION

logger = structlog.get_logger(__name__)

KINDS = ("start", "recovery", "hw")  # log start offset, recovery point, high watermark


@dataclass(frozen=True)
class Entry:
    reason: str
    offsets: dict[str, int]  # of KINDS, those the partition had
    reloadable: bool


@dataclass
class UnloadedPartitions:
    entries: dict[TopicPartition, Entry] = field(default_factory=dict)

    def __contains__(self, tp: object) -> bool:
        return tp in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def reasons(self) -> dict[TopicPartition, str]:
        return {tp: entry.reason for tp, entry in self.entries.items()}

    @property
    def reloadable(self) -> list[TopicPartition]:
        return sorted(tp for tp, entry in self.entries.items() if entry.reloadable)

    def offsets(self, kind: str) -> Offsets:
        return {tp: entry.offsets[kind] for tp, entry in self.entries.items() if kind in entry.offsets}

    def failed(self, tp: TopicPartition, exc: BaseException, start: int | None, recovery: int | None,
               hw: int | None, *, quiet: bool = False) -> None:
        """A load failed (or a loaded log was set aside to be loaded again)."""
        offsets = {kind: value for kind, value in zip(KINDS, (start, recovery, hw), strict=True) if value is not None}
        reloadable = isinstance(exc, OSError)
        if tp not in self.entries:  # another failed retry changes nothing a Fetch resolve reads
            RESOLVE_GENERATION.bump()
        self.entries[tp] = Entry(f"load failed: {exc!r}", offsets, reloadable)
        if not quiet:
            logger.error("partition failed to load; offline", partition=str(tp), error=repr(exc), retried=reloadable)

    def pop(self, tp: TopicPartition) -> Entry | None:
        entry = self.entries.pop(tp, None)
        if entry is not None:
            RESOLVE_GENERATION.bump()
        return entry

    def put_back(self, tp: TopicPartition, entry: Entry) -> None:
        if tp not in self.entries:
            RESOLVE_GENERATION.bump()
        self.entries[tp] = entry
