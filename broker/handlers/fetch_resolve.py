"""A Fetch's resolve: each asked partition found, authorized, and checked as Kafka's ReplicaManager
does before it reads (leader, leader epoch, a follower's membership), into the answer objects the
handler fills (broker/handlers/k01_fetch.py).

A consumer without a fetch session (librdkafka never opens one) asks for the same partitions at the
same leader epochs on every Fetch; its connection keeps what its resolves found since the counter
below last moved (`ResolvedFetch`: per topic as named and partition, the leader epoch asked and a weak
reference to the Partition, so that an idle connection pins no dropped partition or log; at most
KEPT_PARTITIONS_MAX partitions, then it starts afresh), and the next
request reuses it when it asks for kept partitions only, at those epochs, as the same principal,
while broker/resolve_generation.py's counter has not moved: every change the resolve read (topics,
hosted partitions, leadership, logs going offline, ACLs) moves it. Only partitions found and allowed
are kept; an error is always worked out afresh. What the request reads next (the log's offsets, the
last stable offset, quotas) is read anew every time, cached or not. Under the tests
(EBB_TEST_CHECK_KEPT_RESOLVE, set by tests/conftest.py) every reuse is checked against a full resolve.
"""

from __future__ import annotations

import functools
import os
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from broker.log import ReadInfo
from broker.replica import Partition, PartitionError
from broker.resolve_generation import RESOLVE_GENERATION
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, FetchResponse

if TYPE_CHECKING:
    from broker.handlers.context import BrokerContext
    from broker.handlers.fetch_quiet import ReadState
    from broker.request_context import RequestContext

log = structlog.get_logger("fetch")

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = TopicResponse.PartitionData
# Shared, never mutated: the "absent" values of the tagged fields (a diverging follower gets its own).
_NO_DIVERGENCE = PartitionData.EpochEndOffset()
_NO_LEADER = PartitionData.LeaderIdAndEpoch()
_NO_SNAPSHOT = PartitionData.SnapshotId()
_NO_TOPIC_ID = uuid.UUID(int=0)


def partition_data(index: int) -> PartitionData:
    """A partition answer without Struct.__init__'s deep copies of the defaults (the per-partition
    cost of a fetch); every field is set here."""
    p = object.__new__(PartitionData)
    p.partition_index = index
    p.error_code = ErrorCode.NONE
    p.high_watermark = p.last_stable_offset = p.log_start_offset = -1
    p.diverging_epoch = _NO_DIVERGENCE
    p.current_leader = _NO_LEADER
    p.snapshot_id = _NO_SNAPSHOT
    p.aborted_transactions = None
    p.preferred_read_replica = -1
    p.records = b""
    return p


def topic_response(name: str, topic_id: uuid.UUID, partitions: list[PartitionData]) -> TopicResponse:
    """A topic answer, as partition_data: no Struct.__init__; every field set."""
    t = object.__new__(TopicResponse)
    t.topic = name
    t.topic_id = topic_id
    t.partitions = partitions
    return t


@dataclass(slots=True)
class Wanted:
    """One requested partition: where it goes in the response and what was asked."""

    response: PartitionData  # this partition's answer is written into it
    partition: Partition | None
    fetch_offset: int
    max_bytes: int
    last_fetched_epoch: int
    error: ErrorCode = ErrorCode.NONE
    read: ReadInfo | None = None
    follower_log_start_offset: int = -1  # what a follower reports of its own log
    read_state: ReadState | None = None  # a consumer's partition as `read` saw it (fetch_quiet.py)


# A connection keeps at most this many partitions (a consumer's whole assignment on this broker, as a
# rule): past it, it starts afresh with the partitions of the request at hand.
KEPT_PARTITIONS_MAX = 1024
# Tests only: each reuse is checked against a full resolve. An environment variable so that the
# brokers tests start as processes inherit it; the broker logs a warning at start when it is set.
CHECK_ENV = "EBB_TEST_CHECK_KEPT_RESOLVE"
CHECK_KEPT = os.environ.get(CHECK_ENV) == "1"
MISMATCH = "kept fetch resolve differs from a full resolve"
mismatches = 0  # seen in this process (tests/conftest.py fails a test that made one)


class ResolvedFetch:
    """A consumer's sessionless resolves as its connection keeps them: per topic as it was named (id from
    v13, else name), per partition index the leader epoch asked and a weak reference to the Partition
    found. librdkafka leaves out of a Fetch the partitions whose queue is full, so the requests of one
    connection ask for varying subsets: each is served from here when all of its partitions are."""

    __slots__ = ("generation", "version", "principal", "topics", "size")

    def __init__(self, generation: int, version: int, principal: str) -> None:
        self.generation = generation
        self.version = version
        self.principal = principal
        self.topics: dict[object, dict[int, tuple[int, weakref.ref[Partition]]]] = {}
        self.size = 0  # partitions kept, over all topics


def resolve(broker: BrokerContext, asked: list[FetchRequest.FetchTopic], version: int, replica_id: int,
            may_read: Callable[[str], bool], leader_only: bool) -> tuple[list[TopicResponse], list[Wanted]]:
    replicas = broker.replicas
    topics = []
    wanted: list[Wanted] = []
    for topic in asked:
        partitions: list[PartitionData] = []
        if version >= 13:
            found = broker.topics.by_id(topic.topic_id)
            topics.append(topic_response("", topic.topic_id, partitions))
            unknown = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            found = broker.topics.get(topic.topic)
            topics.append(topic_response(topic.topic, _NO_TOPIC_ID, partitions))
            unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # Authorized once per topic named with partitions (Kafka's filterByAuthorized), before existence
        name = found.name if found is not None else (topic.topic if version < 13 else None)
        refused = unknown if found is None else None
        if topic.partitions and name is not None and not may_read(name):
            refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for part in topic.partitions:
            response = partition_data(part.partition)
            partitions.append(response)
            w = Wanted(response, None, part.fetch_offset, part.partition_max_bytes, part.last_fetched_epoch)
            wanted.append(w)
            if refused is not None:
                w.error = refused
                continue
            assert found is not None  # refused otherwise
            try:
                partition = replicas.partition_of(found, part.partition)
                if leader_only:
                    partition.check_leader()
                partition.check_leader_epoch(part.current_leader_epoch)
                if replica_id >= 0 and replica_id not in partition.replicas:
                    raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                         f"{partition.topic_partition}: broker {replica_id} is not a replica")
            except PartitionError as exc:
                w.error = exc.error_code
                continue
            w.partition = partition
            w.follower_log_start_offset = part.log_start_offset
    return topics, wanted


def resolve_consumer(broker: BrokerContext, asked: list[FetchRequest.FetchTopic], version: int,
                     connection: RequestContext, may_read: Callable[[str], bool], leader_only: bool
                     ) -> tuple[list[TopicResponse], list[Wanted]]:
    """`resolve` for a consumer without a session, served from what its connection kept when that holds."""
    kept = connection.fetch_resolve
    if (kept is not None and kept.generation == RESOLVE_GENERATION.value and kept.version == version
            and kept.principal is connection.principal):
        reused = _reuse(kept, asked, version) if _compiled_reuse is None else _compiled_reuse(
            kept.topics, asked, version >= 13)
        if reused is not None:
            if CHECK_KEPT:
                _check(broker, asked, version, may_read, leader_only, reused[1])
            return reused
    topics, wanted = resolve(broker, asked, version, -1, may_read, leader_only)
    # The generation is read after the resolve, which runs without an await: a Partition it created
    # moved the counter before this reads it.
    generation = RESOLVE_GENERATION.value
    if (kept is None or kept.generation != generation or kept.version != version
            or kept.principal is not connection.principal or kept.size + len(wanted) > KEPT_PARTITIONS_MAX):
        if len(wanted) > KEPT_PARTITIONS_MAX:
            connection.fetch_resolve = None
            return topics, wanted
        kept = connection.fetch_resolve = ResolvedFetch(generation, version, connection.principal)
    _keep(kept, asked, wanted, version)
    return topics, wanted


def _keep(kept: ResolvedFetch, asked: list[FetchRequest.FetchTopic], wanted: list[Wanted], version: int) -> None:
    """Add the partitions this resolve found and allowed; an error is never kept."""
    answers = iter(wanted)
    for topic in asked:
        parts = None
        for part in topic.partitions:
            partition = next(answers).partition
            if partition is None:
                continue
            if parts is None:
                parts = kept.topics.setdefault(topic.topic_id if version >= 13 else topic.topic, {})
            if part.partition not in parts:
                kept.size += 1
            parts[part.partition] = (part.current_leader_epoch, weakref.ref(partition))


def _check(broker: BrokerContext, asked: list[FetchRequest.FetchTopic], version: int,
           may_read: Callable[[str], bool], leader_only: bool, reused: list[Wanted]) -> None:
    """Tests only: a reused resolve must be what a full one finds now, the same Partitions, no error."""
    _, fresh = resolve(broker, asked, version, -1, may_read, leader_only)
    if [(w.error, w.partition) for w in fresh] != [(ErrorCode.NONE, w.partition) for w in reused]:
        global mismatches
        mismatches += 1
        log.error(MISMATCH, kept=[repr(w.partition) for w in reused],
                  fresh=[(w.error.name, repr(w.partition)) for w in fresh])
        raise AssertionError(MISMATCH)


def _reuse(kept: ResolvedFetch, asked: list[FetchRequest.FetchTopic], version: int
           ) -> tuple[list[TopicResponse], list[Wanted]] | None:
    """The answer objects for `asked` with the kept partitions; None unless every partition asked was
    kept, at the leader epoch asked now."""
    by_id = version >= 13
    known = kept.topics
    topics = []
    wanted = []
    for topic in asked:
        parts = known.get(topic.topic_id if by_id else topic.topic)
        if parts is None:
            return None
        partitions: list[PartitionData] = []
        if by_id:
            topics.append(topic_response("", topic.topic_id, partitions))
        else:
            topics.append(topic_response(topic.topic, _NO_TOPIC_ID, partitions))
        for part in topic.partitions:
            index = part.partition
            found = parts.get(index)
            if found is None or found[0] != part.current_leader_epoch:
                return None
            partition = found[1]()
            if partition is None:  # dropped (the counter moved then too)
                return None
            response = partition_data(index)
            partitions.append(response)
            wanted.append(Wanted(response, partition, part.fetch_offset, part.partition_max_bytes,
                                 part.last_fetched_epoch))
    return topics, wanted


try:  # _reuse in one call, where it is built (setup.py): broker/handlers/_fetch_reuse.c
    from broker.handlers._fetch_reuse import member_offsets
    from broker.handlers._fetch_reuse import reuse as _reuse_in_c
except ImportError:  # pragma: no cover - the package installed without a C compiler
    _reuse_in_c = None
# Its answer objects are copies of these (partition_data's defaults, the dataclass's), not its own, each
# slot copied by its offset
_compiled_reuse = None if _reuse_in_c is None else functools.partial(
    _reuse_in_c, partition_data(0), member_offsets(PartitionData, PartitionData.__slots__),
    Wanted(partition_data(0), None, 0, 0, -1), member_offsets(Wanted, Wanted.__slots__), TopicResponse, _NO_TOPIC_ID)
