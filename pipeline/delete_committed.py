"""deleteCommitted=true: delete what a stream has committed, KIP-762's way, from the stream's driver process.

After each commit of the stream's group, the committed offsets of topics matching deleteCommitted.topics
are handed to a background thread that deletes below them with DeleteRecords, under these rules:
- only one delete of this stream is in flight at a time; offsets handed over meanwhile wait, and only
  the newest wait (a later commit covers an earlier one);
- every other consumer group that reads the topic (commits on it, or has live members subscribed to it)
  must have committed each partition; the delete goes up to the smallest of those commits and ours, so
  no group loses a record it has not read;
- a topic it cannot prove safe (a reader without a commit on some partition, a group mid-rebalance whose
  subscriptions the broker does not show, a group it cannot describe) is skipped with a warning.
Readers without a consumer group (another Spark query without kafka.group.id, an assigned consumer that
never commits) are invisible to the broker: the topic pattern is the guard against them, as in KIP-762.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Mapping

import structlog

from client import Admin, KafkaClientError, TopicPartition

from .config import DeleteCommitted, ReadConfig, cluster_options
from .groups import GroupView, describe_group, list_groups

log = structlog.get_logger("ebb.pipeline")

Offsets = dict[TopicPartition, int]


def safe_targets(own: Offsets, others: list[GroupView]) -> tuple[Offsets, dict[str, str]]:
    """The offsets it is safe to delete below, and the topics skipped with the reason.

    `own`: what this stream committed; `others`: every other group, with its commits on those partitions."""
    skipped: dict[str, str] = {}
    unknown = [view.group_id for view in others if view.members_unknown]
    topics = sorted({tp.topic for tp in own})
    if unknown:
        reason = f"group(s) {', '.join(unknown)} have members whose subscriptions the broker does not show yet"
        return {}, dict.fromkeys(topics, reason)
    targets: Offsets = {}
    for topic in topics:
        partitions = [tp for tp in own if tp.topic == topic]
        readers = [v for v in others if topic in v.subscribed or any(tp.topic == topic for tp in v.committed)]
        behind = [(v.group_id, tp) for v in readers for tp in partitions if tp not in v.committed]
        if behind:
            group, tp = behind[0]
            skipped[topic] = f"group {group} reads it but has no commit on {tp}"
            continue
        for tp in partitions:
            targets[tp] = min([own[tp], *(v.committed[tp] for v in readers)])
    return targets, skipped


class CommittedDeleter:
    """Deletes below the stream's commits on a thread of its own, never two deletes at once."""

    def __init__(self, config: ReadConfig):
        assert config.group_id is not None and config.delete_committed is not None
        self.config = config
        self.rules: DeleteCommitted = config.delete_committed
        self.pattern = re.compile(self.rules.topics)
        self._waiting: Offsets | None = None
        self._done: Offsets = {}  # what was deleted up to, so an unchanged commit is not sent again
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """The group committed `offsets`: queue a delete of the matching topics (replacing one still waiting)."""
        wanted = {tp: o for tp, o in offsets.items() if self.pattern.fullmatch(tp.topic)}
        if not wanted:
            return
        with self._lock:
            self._waiting = wanted
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ebb-delete-committed", daemon=True)
                self._thread.start()
            self._lock.notify()

    def close(self, timeout_s: float = 10.0) -> None:
        """Let a waiting or running delete finish (up to `timeout_s`), then stop the thread."""
        with self._lock:
            self._closed = True
            self._lock.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        with asyncio.Runner() as runner:
            admin = Admin(self.config.bootstrap, **cluster_options(self.config))
            try:
                runner.run(admin.start())
                while (offsets := self._next()) is not None:
                    try:
                        runner.run(self._delete(admin, offsets))
                    except Exception as exc:  # the thread must outlive any round; the next commit retries
                        log.warning("delete_committed_failed", group=self.config.group_id, error=repr(exc))
            except KafkaClientError as exc:
                log.warning("delete_committed_failed", group=self.config.group_id, error=str(exc))
            finally:
                runner.run(admin.close())

    def _next(self) -> Offsets | None:
        with self._lock:
            while self._waiting is None and not self._closed:
                self._lock.wait()
            offsets, self._waiting = self._waiting, None
            return offsets

    async def _delete(self, admin: Admin, offsets: Offsets) -> None:
        offsets = {tp: o for tp, o in offsets.items() if o > self._done.get(tp, -1)}
        if not offsets:
            return
        groups = await list_groups(admin)
        others = [await describe_group(admin, group, offsets) for group in sorted(groups)
                  if group != self.config.group_id]
        targets, skipped = safe_targets(offsets, others)
        for topic, reason in skipped.items():
            if (topic, reason) not in self._warned:  # once per topic and reason, not every batch
                self._warned.add((topic, reason))
                log.warning("delete_committed_skipped", topic=topic, reason=reason, group=self.config.group_id)
        if not targets:
            return
        result = await admin.delete_records(targets, leader_only=self.rules.leader_only)
        for tp, outcome in result.partition_results().items():
            if outcome.ok:
                self._done[tp] = targets[tp]
            else:
                log.warning("delete_committed_refused", partition=str(tp), error=outcome.error.name)
