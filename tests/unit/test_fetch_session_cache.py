"""The fetch session cache's slots and eviction (Kafka's FetchSessionCache rules), on a fake clock."""

from broker.fetch_sessions import EVICTION_MS, FINAL_EPOCH, CachedPartition, FetchSessionCache, next_epoch
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def partitions(n: int) -> dict:
    asked = FetchRequest.FetchTopic.FetchPartition
    return {("t", p): CachedPartition("t", asked(partition=p)) for p in range(n)}


def cache(slots: int) -> tuple[FetchSessionCache, Clock]:
    clock = Clock()
    return FetchSessionCache(slots, clock_ms=clock), clock


def test_epochs_wrap_to_one():
    assert next_epoch(0) == 1 and next_epoch(7) == 8 and next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_no_slots_no_sessions():
    sessions, _ = cache(0)
    assert sessions.create(False, False, partitions(3)) == 0 and not sessions.sessions


def test_a_full_cache_keeps_new_sessions_out_until_one_is_stale():
    sessions, clock = cache(2)
    first = sessions.create(False, False, partitions(1))
    clock.now = 1000
    second = sessions.create(False, False, partitions(1))
    clock.now = 2000
    assert sessions.create(False, False, partitions(50)) == 0  # both too new to lose, however small
    clock.now = 1000 + EVICTION_MS + 1  # the first, idle longest, is stale now
    third = sessions.create(False, False, partitions(1))
    assert third and set(sessions.sessions) == {second, third} and first not in sessions.sessions
    assert sessions.evictions == 1


def test_old_busy_sessions_give_way_to_bigger_ones():
    sessions, clock = cache(2)
    small = sessions.create(False, False, partitions(2))
    big = sessions.create(False, False, partitions(5))
    for step in range(1, 4):  # both stay in use, and become old enough to be judged by size
        clock.now = step * EVICTION_MS / 2 + 1
        for session_id in (small, big):
            session = sessions.get(session_id)
            assert session is not None
            sessions.continue_session(session_id, session.epoch, False, [], [])
    assert sessions.create(False, False, partitions(1)) == 0  # smaller than any: refused
    bigger = sessions.create(False, False, partitions(3))
    assert bigger and small not in sessions.sessions and big in sessions.sessions


def test_followers_evict_new_consumer_sessions():
    sessions, clock = cache(1)
    consumer = sessions.create(False, False, partitions(10))
    clock.now = 10
    assert sessions.create(False, False, partitions(20)) == 0  # a consumer cannot evict a new session
    follower = sessions.create(True, False, partitions(1))  # a follower can
    assert follower and consumer not in sessions.sessions
    clock.now = 20
    assert sessions.create(True, False, partitions(5)) == 0  # but not another new follower's


def test_continuing_a_session():
    sessions, _ = cache(5)
    session_id = sessions.create(False, True, partitions(2))
    assert sessions.continue_session(session_id + 1, 1, True, [], []) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert sessions.continue_session(session_id, 2, True, [], []) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert sessions.continue_session(session_id, 1, False, [], []) == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    session = sessions.continue_session(session_id, 1, True, [], [])
    assert not isinstance(session, ErrorCode) and session is not None and session.epoch == 2
    assert sessions.partitions == 2
