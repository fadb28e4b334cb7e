"""Fetch sessions (KIP-227): what each fetcher asked last, so that it need only send what changed.

A full fetch with SessionEpoch 0 asks for a session: when the cache has a slot (or can free one),
the broker keeps every partition of the request with its parameters and the high watermark and log
start offset it answered, and answers with the new SessionId. The fetcher then sends incremental
fetches (SessionId, epoch 1, 2, ...) naming only partitions whose parameters changed, and the ones to
forget; the broker fetches every partition of the session and answers only those with something new:
records, a moved high watermark or log start offset, an error, a preferred read replica or a
diverging epoch (a consumer's partitions that gave nothing last time and whose state has not changed
since are left out before their read: `CachedPartition.quiet`, broker/handlers/fetch_quiet.py). A
partition that returned records moves to the end of the session's order, so that
MaxBytes is shared round-robin across requests, as Kafka does.

Eviction is Kafka's FetchSessionCache's: when every slot is taken, a new session may take the one
least recently used if it has been idle more than EVICTION_MS; otherwise the least valuable
(unprivileged before privileged, then fewest partitions) of the sessions created more than
EVICTION_MS ago, if the new one is worth at least as much. Followers' sessions are privileged: they
may also evict unprivileged sessions however new. Kafka splits its cache into 8 shards only to spread
lock contention between request threads; one event loop needs no locks, so this is one cache of
`max.incremental.fetch.session.cache.slots`.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, FetchResponse

FINAL_EPOCH = -1  # a sessionless fetch, or one closing its session
INITIAL_EPOCH = 0  # a full fetch asking for a session
INVALID_SESSION_ID = 0
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
_INT32_MAX = 2**31 - 1

_Topic = FetchRequest.FetchTopic
_Asked = _Topic.FetchPartition
_Answer = FetchResponse.FetchableTopicResponse.PartitionData
Key = tuple[str | uuid.UUID, int]  # (topic name, or id from v13, partition)


def next_epoch(epoch: int) -> int:
    """The epoch the fetcher sends next (wrapping to 1, never back to the initial 0)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


def topic_key(topic: _Topic | FetchRequest.ForgottenTopic, uses_topic_ids: bool) -> str | uuid.UUID:
    return topic.topic_id if uses_topic_ids else topic.topic


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: its last request parameters and what the broker last answered."""

    topic: str | uuid.UUID
    asked: _Asked
    high_watermark: int = -1
    log_start_offset: int = -1
    # A consumer's partition last answered with nothing to say at the end of what it may read: the
    # state that answer came from (broker/handlers/fetch_quiet.py `quiet_state`). While the partition's
    # state equals it, the next incremental answer would leave it out again, so it is not read.
    quiet: tuple | None = None

    def changed(self, error: int, high_watermark: int, log_start_offset: int, answer: _Answer,
                records_size: int) -> bool:
        """Whether an incremental answer must carry this partition, given what it would say (the
        offsets are -1 with an error); remembers what it carries. `answer` has its preferred read
        replica and diverging epoch set already."""
        must = records_size > 0
        if self.high_watermark != high_watermark:
            self.high_watermark = high_watermark
            must = True
        if self.log_start_offset != log_start_offset:
            self.log_start_offset = log_start_offset
            must = True
        if error != ErrorCode.NONE:
            self.high_watermark = -1  # so that the partition is sent again once the error clears
            must = True
        diverging = answer.diverging_epoch
        return (must or answer.preferred_read_replica >= 0
                or diverging.epoch != -1 or diverging.end_offset != -1)


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    privileged: bool  # a follower's
    uses_topic_ids: bool  # created at v13+: topics by id, and only v13+ may continue it
    creation_ms: float
    partitions: dict[Key, CachedPartition]  # in the order requests read them
    epoch: int = 1  # the epoch the next incremental fetch must carry
    last_used_ms: float = 0.0
    cached_size: int = -1  # partitions at the last touch; -1 while not in the cache
    evictable_by_all: bool = False  # as judged at the last touch (Kafka's evictableByAll)
    evictable_by_privileged: bool = False

    def update(self, topics: Iterable[_Topic], forgotten: Iterable[FetchRequest.ForgottenTopic]) -> None:
        """An incremental request's partitions replace their cached parameters (new ones are added at
        the end); its forgotten partitions leave the session."""
        ids = self.uses_topic_ids
        partitions = self.partitions
        for topic in topics:
            name = topic_key(topic, ids)
            for asked in topic.partitions:
                cached = partitions.get((name, asked.partition))
                if cached is None:
                    partitions[(name, asked.partition)] = CachedPartition(name, asked)
                else:
                    cached.asked = asked
        for gone in forgotten:
            name = topic_key(gone, ids)
            for index in gone.partitions:
                partitions.pop((name, index), None)

    def request_topics(self, cached: list[CachedPartition] | None = None) -> tuple[list[_Topic], list[CachedPartition]]:
        """The session's partitions (or those of `cached`, in session order) as a request's topics
        (consecutive partitions of one topic share an entry, as in Kafka's answers), and the cached
        partitions in the same order."""
        topics: list[_Topic] = []
        if cached is None:
            cached = list(self.partitions.values())
        ids = self.uses_topic_ids
        current: _Topic | None = None
        for part in cached:
            if current is None or topic_key(current, ids) != part.topic:
                current = _Topic.__new__(_Topic)
                if isinstance(part.topic, uuid.UUID):
                    current.topic, current.topic_id = "", part.topic
                else:
                    current.topic, current.topic_id = part.topic, uuid.UUID(int=0)
                current.partitions = []
                topics.append(current)
            current.partitions.append(part.asked)
        return topics, cached

    def moved_to_end(self, part: CachedPartition) -> None:
        """A partition that returned records goes last, so that the next fetches serve the others first."""
        key = (part.topic, part.asked.partition)
        self.partitions[key] = self.partitions.pop(key)


@dataclass
class FetchSessionCache:
    """The broker's fetch sessions, by id (one per broker, held by the Broker)."""

    max_slots: int
    eviction_ms: int = EVICTION_MS
    clock_ms: Callable[[], float] = field(default=lambda: time.monotonic() * 1000.0)
    sessions: dict[int, FetchSession] = field(default_factory=dict)
    evictions: int = 0

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.cached_size = -1
        return session

    @property
    def partitions(self) -> int:
        """Partitions cached across sessions (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(s.cached_size for s in self.sessions.values())

    def continue_session(self, session_id: int, epoch: int, uses_topic_ids: bool, topics: list[_Topic],
                         forgotten: list[FetchRequest.ForgottenTopic]) -> FetchSession | ErrorCode | None:
        """An incremental request: its session, updated and moved to its next epoch; the error it gets;
        or None when it left the session empty (the session is closed and the request sessionless)."""
        session = self.sessions.get(session_id)
        if session is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if session.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        if session.uses_topic_ids != uses_topic_ids:
            return ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        session.update(topics, forgotten)
        if not session.partitions:
            self.remove(session_id)
            return None
        self.touch(session, self.clock_ms())
        session.epoch = next_epoch(session.epoch)
        return session

    def create(self, privileged: bool, uses_topic_ids: bool, partitions: dict[Key, CachedPartition]) -> int:
        """A session for a full fetch's partitions if a slot is free or can be freed; its id, else 0."""
        now = self.clock_ms()
        if len(self.sessions) >= self.max_slots and not self._evict_for(privileged, len(partitions), now):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_id(), privileged, uses_topic_ids, now, partitions)
        self.sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def touch(self, session: FetchSession, now: float) -> None:
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        old = now - session.creation_ms > self.eviction_ms
        session.evictable_by_all = old
        session.evictable_by_privileged = old or not session.privileged

    def _new_id(self) -> int:
        while True:
            session_id = random.randint(1, _INT32_MAX)
            if session_id not in self.sessions:
                return session_id

    def _evict_for(self, privileged: bool, size: int, now: float) -> bool:
        """Kafka's tryEvict: the stalest session if idle long enough, else the least valuable one
        the new session outweighs."""
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stalest.last_used_ms > self.eviction_ms:
            self.remove(stalest.id)
            self.evictions += 1
            return True
        candidates = [s for s in self.sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        cheapest = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        if (privileged, size, 0) < (cheapest.privileged, cheapest.cached_size, cheapest.id):
            return False
        self.remove(cheapest.id)
        self.evictions += 1
        return True
