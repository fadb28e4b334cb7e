"""Trimming records that consumer groups have committed: Ebb's `retention.committed.groups` topic config.

A committed offset is the next offset its group will read, so every record below the smallest
committed offset of the groups that matter has been consumed by all of them. For each partition led
here whose topic sets the config (under `cleanup.policy=delete`, internal topics never), the log start
offset moves up to that offset, capped at the high watermark, through the replica manager's
delete_records as a DeleteRecords v3 LeaderOnly request moves it: records below stop being readable at
once (ListOffsets earliest returns the new start, a Fetch below it gets OFFSET_OUT_OF_RANGE), whole
segments below it go, and the new start is in log-start-offset-checkpoint before the round ends.

Which groups matter:
- named groups: every one must have a commit on the partition; one without holds the partition back;
- "*": every group with a commit on the partition, and every group whose live members read the
  topic; a live group without a commit holds the partition back (its position is unknown). A group
  that was never seen here (never joined, never committed) cannot be waited for: name it.

In a cluster the groups are spread over the coordinators: the leader asks every broker for its groups'
commits and members (broker/group/cluster_commits.py) each round, and trims nothing under "*" when
one of them cannot answer.

When: a commit on such a topic schedules its partitions at once (commits that arrive during a round
are trimmed together in the next); a config change trims the topic at once; a full pass at start-up
and every `log.retention.check.interval.ms` catches what no commit signals (a group deleted, its
offsets expired or deleted, its members gone, a trim a crash kept from the disk). Readers see a new
start as soon as it moves, and the round ends once it is on disk; like DeleteRecords without a
caller, a crash in between loses only the move, which the start-up round makes again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

import structlog

from broker.aio import wait_for
from broker.group.cluster_commits import ClusterCommits
from broker.log import StartOffsetReason, TopicPartition
from broker.replica import PartitionError
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.group.coordinator import GroupCoordinator
    from broker.replica import ReplicaManager
    from broker.topic import Topic
    from broker.topics import TopicManager

# In a cluster: the commits of every coordinator's groups on {topic: [partition, ...]}.
AskCoordinators = Callable[[dict[str, list[int]]], Awaitable[ClusterCommits]]

log = structlog.get_logger("trim")

EVERY_GROUP = "*"


def trim_offset(groups: tuple[str, ...], committed: dict[str, int], live_readers: Iterable[str]) -> int | None:
    """The offset below which every group that matters has consumed, or None when one of them has no
    commit (or nobody has committed). `committed`: group -> committed offset on the partition;
    `live_readers`: groups with live members reading the topic or committed on the partition."""
    if not groups:
        return None
    if groups == (EVERY_GROUP,):
        if not committed or any(group not in committed for group in live_readers):
            return None
        return min(committed.values())
    if any(group not in committed for group in groups):
        return None
    return min(committed[group] for group in groups)


class CommittedTrimmer:
    """A broker service: moves log start offsets up to what the configured groups have committed."""

    def __init__(self, groups: GroupCoordinator, topics: TopicManager, replicas: ReplicaManager,
                 ask_coordinators: AskCoordinators | None, interval_s: float) -> None:
        """`ask_coordinators`: in a cluster, where the other brokers' groups commit (None on one broker);
        `interval_s`: between full passes (log.retention.check.interval.ms)."""
        self.groups = groups
        self.topics = topics
        self.replicas = replicas
        self.ask_coordinators = ask_coordinators
        self.interval_s = interval_s
        self._pending: set[TopicPartition] = set()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.rounds = 0  # finished rounds, for tests and logs

    async def start(self) -> None:
        self.groups.commit_listeners.append(self.note_commits)
        self.topics.config_listeners.append(self.note_config_change)
        # A full round at start: commits were replayed from __consumer_offsets, and a trim that a crash
        # kept from reaching log-start-offset-checkpoint is redone from them.
        self._pending.update(self._all_trimmed_partitions())
        self._wakeup.set()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # --- what starts a round ---------------------------------------------------------------------

    def note_commits(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Called after a commit is stored: queue the partitions of topics that trim."""
        for topic_name, index in partitions:
            topic = self.topics.get(topic_name)
            if topic is not None and topic.log_config.retention_committed_groups:
                self._pending.add(TopicPartition(topic_name, index))
        if self._pending:
            self._wakeup.set()

    def note_config_change(self, topic: Topic) -> None:
        if topic.log_config.retention_committed_groups:
            self._pending.update(topic.partitions())
            self._wakeup.set()

    async def _run(self) -> None:
        next_full = asyncio.get_running_loop().time() + self.interval_s
        while True:
            timeout = max(0.0, next_full - asyncio.get_running_loop().time())
            try:
                await wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                pass
            self._wakeup.clear()
            if asyncio.get_running_loop().time() >= next_full:
                chosen = self._all_trimmed_partitions()
                next_full = asyncio.get_running_loop().time() + self.interval_s
            else:
                chosen = set(self._pending)
            self._pending.difference_update(chosen)
            try:
                await self.trim(chosen)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next round tries again
                log.error("trim round failed", error=repr(exc))

    def _all_trimmed_partitions(self) -> set[TopicPartition]:
        return {tp for topic in self.topics.all() if topic.log_config.retention_committed_groups
                for tp in topic.partitions()}

    # --- a round ---------------------------------------------------------------------------------

    async def trim(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Move each partition's log start offset up to its groups' committed offset; one checkpoint
        write covers the round. Returns the new log start offset of each partition that moved."""
        candidates = []
        for tp in sorted(partitions):
            partition = self._leader(tp)
            if partition is not None and partition.log.config.delete_enabled \
                    and partition.log.config.retention_committed_groups:
                candidates.append(partition)
        view = None
        if candidates and self.ask_coordinators is not None:
            # Other brokers coordinate other groups: ask them all (broker/group/cluster_commits.py).
            wanted: dict[str, list[int]] = {}
            for partition in candidates:
                wanted.setdefault(partition.topic_partition.topic, []).append(partition.topic_partition.partition)
            view = await self.ask_coordinators(wanted)
        wanted_starts: dict[TopicPartition, int] = {}
        for partition in candidates:
            tp, config = partition.topic_partition, partition.log.config
            live_readers: Iterable[str]
            if view is None:
                committed = self.groups.committed_offsets(tp.topic, tp.partition)
                live_readers = self.groups.min_committed_offset(tp.topic, tp.partition).active_groups
            elif not view.complete and config.retention_committed_groups == (EVERY_GROUP,):
                continue  # a coordinator did not answer: its groups' positions are unknown
            else:
                committed = view.committed.get((tp.topic, tp.partition), {})
                live_readers = view.live_readers(tp.topic, tp.partition)
            offset = trim_offset(config.retention_committed_groups, committed, live_readers)
            if offset is None:
                continue
            offset = min(offset, partition.high_watermark)
            if offset > partition.log_start_offset:
                wanted_starts[tp] = offset
        result = {}
        if wanted_starts:
            # As DeleteRecords LeaderOnly: the round ends with the leader's new starts on disk;
            # followers take them from their next fetch.
            outcomes = await self.replicas.delete_records(wanted_starts, timeout_ms=0, leader_only=True,
                                                          reason=StartOffsetReason.COMMITTED_OFFSETS)
            for tp, outcome in outcomes.items():
                if outcome.error_code == ErrorCode.NONE:
                    result[tp] = outcome.leader_log_start_offset
                else:
                    log.warning("trim failed", partition=str(tp), offset=wanted_starts[tp],
                                error=ErrorCode(outcome.error_code).name, reason=outcome.message)
        if result:
            log.info("trimmed committed records", partitions={str(tp): o for tp, o in result.items()})
        self.rounds += 1
        return result

    def _leader(self, tp: TopicPartition):
        topic = self.topics.get(tp.topic)
        if topic is None or topic.internal:
            return None
        try:
            partition = self.replicas.partition(tp.topic, tp.partition)
        except PartitionError:
            return None
        return partition if partition.is_leader else None  # followers take the start from their leader
