"""Which of a consumer's fetch session partitions need no read (KIP-227; for k01_fetch.py).

An incremental answer leaves out a partition with nothing new. Kafka reads every session partition to
find that out; here a consumer's partition last answered with no error and no records, because it asked
from the end of what it may read, keeps the state that answer came from (`CachedPartition.quiet`),
and while that state is the same the partition is not looked up, read or answered: the answer would
leave it out. Authorization is asked per topic each time, and the partition must still be the one
hosted. Followers are always read: their fetch position moves the ISR and the high watermark.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

from broker.fetch_sessions import CachedPartition
from broker.handlers import BrokerContext
from broker.replica import Partition, PartitionError
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.handlers.fetch_resolve import Wanted


class ReadState(NamedTuple):
    """What a consumer's read of a partition saw, taken when it read (k01_fetch._plan): the answer's
    leader epoch check and records came from this, not from what the partition is after later awaits."""

    partition: Partition
    leader_epoch: int
    is_leader: bool
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int  # -1 unless READ_COMMITTED


def read_state(partition: Partition, committed: bool) -> ReadState:
    return ReadState(partition, partition.leader_epoch, partition.is_leader, partition.high_watermark,
                     partition.log_start_offset, partition.last_stable_offset if committed else -1)


def quiet_state(part: CachedPartition, state: ReadState, committed: bool, leader_only: bool) -> tuple:
    """All that a consumer's answer for a session partition depends on, besides authorization and the
    partition still being this one (checked on their own): its request, the role, the offsets."""
    return part.asked, state, committed, leader_only


def remember_quiet(pairs: Iterable[tuple[CachedPartition, Wanted]], committed: bool, leader_only: bool) -> None:
    """After a consumer's read of session partitions: a partition that gave no error and no records
    because it asked from the end of what it may read keeps the state it was read in (`not_quiet`).
    That state is the one taken at the read: a leader epoch or log start that moved while the answer
    was being sent differs from it, so the next fetch reads the partition again and reports the move."""
    for part, w in pairs:
        state, read = w.read_state, w.read
        if (w.error == ErrorCode.NONE and w.partition is not None and read is not None and state is not None
                and not read.size
                and w.fetch_offset >= (state.last_stable_offset if committed else state.high_watermark)):
            part.quiet = quiet_state(part, state, committed, leader_only)
        else:
            part.quiet = None


def not_quiet(broker: BrokerContext, cached: list[CachedPartition],
              may_read: Callable[[str], bool], committed: bool, leader_only: bool) -> list[CachedPartition]:
    """A consumer's session partitions to read now: all but those whose state is the one their last
    empty answer came from (still authorized, still the same partition): reading one of those would
    give nothing new, and an incremental answer leaves it out (the caught-up consumer's common case,
    which otherwise costs a lookup, a log read and an answer per partition)."""
    replicas = broker.replicas
    kept = []
    topics: dict = {}  # topic key -> the topic if it is there and may be read, else None
    for part in cached:
        quiet = part.quiet
        if quiet is None:
            kept.append(part)
            continue
        key = part.topic
        if key in topics:
            found = topics[key]
        else:
            found = broker.topics.by_id(key) if isinstance(key, uuid.UUID) else broker.topics.get(key)
            if found is not None and not may_read(found.name):
                found = None
            topics[key] = found
        if found is None:
            kept.append(part)
            continue
        try:
            partition = replicas.partition_of(found, part.asked.partition)
        except PartitionError:
            kept.append(part)
            continue
        if quiet != quiet_state(part, read_state(partition, committed), committed, leader_only):
            kept.append(part)
    return kept
