"""A stream's progress, reported to its consumer group (kafka.group.id) once each micro-batch is done.

Where the end of a finished batch is known: Spark calls the reader's latestOffset(start, ...) to plan the
next batch only after the previous one is in the query's commit log, and `start` is that batch's end.
It does so after the last batch of an AvailableNow run too (that call finds nothing new and the run
stops), and every few milliseconds while a query with the default trigger waits for data. Spark's own
commit(end) is a batch late and never comes for the last batch, so it is not used.

The commit only reports: the checkpoint stays the source of truth for where a restarted query goes on.
A failed commit is logged, never raised (raising would fail the query); the next batch commits again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from client import Admin, KafkaClientError, TopicPartition

from .config import ReadConfig
from .delete_committed import CommittedDeleter
from .groups import commit_offsets

log = structlog.get_logger("ebb.pipeline")

Offsets = dict[TopicPartition, int]
AdminCall = Callable[[Callable[[Admin], Awaitable]], object]


class GroupProgress:
    """Commits each finished batch's end offsets to the group, then hands them to deleteCommitted."""

    def __init__(self, config: ReadConfig):
        assert config.group_id is not None
        self.group_id = config.group_id
        self._reported: Offsets | None = None
        self.deleter = CommittedDeleter(config) if config.delete_committed is not None else None

    def batch_done(self, call: AdminCall, offsets: Offsets) -> None:
        """`offsets` ended a batch that is in the commit log (or started the query): commit them if new."""
        if offsets == self._reported or not offsets:
            return
        try:
            call(lambda admin: commit_offsets(admin, self.group_id, offsets))
        except (KafkaClientError, OSError) as exc:
            log.warning("group_commit_failed", group=self.group_id, error=str(exc))
            return
        self._reported = dict(offsets)
        if self.deleter is not None:
            self.deleter.committed(offsets)

    def close(self) -> None:
        if self.deleter is not None:
            self.deleter.close()
