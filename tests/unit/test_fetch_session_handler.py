"""A follower's fetch session (broker/replica/fetch_session_handler.py): what each request names."""

from broker.replica.fetch_session_handler import FetchSessionHandler
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, FetchResponse

Part = FetchRequest.FetchTopic.FetchPartition


def wanted(**offsets: int) -> dict:
    """topic-partition "t0", "t1", ... -> fetch offset."""
    return {"t": [Part(partition=int(k[1:]), fetch_offset=o, partition_max_bytes=100) for k, o in offsets.items()]}


def build(handler: FetchSessionHandler, parts: dict) -> FetchRequest:
    request = FetchRequest()
    handler.build(parts, request)
    return request


def named(request: FetchRequest) -> list[tuple[int, int]]:
    return [(p.partition, p.fetch_offset) for t in request.topics for p in t.partitions]


def forgotten(request: FetchRequest) -> list[int]:
    return [p for t in request.forgotten_topics_data for p in t.partitions]


def test_full_then_only_changes_and_forgotten():
    handler = FetchSessionHandler()
    first = build(handler, wanted(p0=5, p1=7))
    assert (first.session_id, first.session_epoch, named(first)) == (0, 0, [(0, 5), (1, 7)])
    assert handler.answered(FetchResponse(session_id=42))
    second = build(handler, wanted(p0=5, p1=9))
    assert (second.session_id, second.session_epoch, named(second), forgotten(second)) == (42, 1, [(1, 9)], [])
    assert handler.answered(FetchResponse(session_id=42))
    third = build(handler, wanted(p1=9))
    assert (third.session_epoch, named(third), forgotten(third)) == (2, [], [0])


def test_session_errors_and_lost_answers_make_the_next_fetch_full():
    handler = FetchSessionHandler()
    build(handler, wanted(p0=1))
    handler.answered(FetchResponse(session_id=42))
    build(handler, wanted(p0=1))
    assert not handler.answered(FetchResponse(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH))
    again = build(handler, wanted(p0=1))
    assert (again.session_id, again.session_epoch, named(again)) == (42, 0, [(0, 1)])  # closes 42, asks anew
    handler.answered(FetchResponse(session_id=43))
    build(handler, wanted(p0=2))
    handler.failed()  # the connection dropped
    assert build(handler, wanted(p0=2)).session_epoch == 0
    assert not handler.answered(FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
    assert build(handler, wanted(p0=2)).session_id == 0


def test_no_session_given_stays_full():
    handler = FetchSessionHandler()
    build(handler, wanted(p0=1))
    assert handler.answered(FetchResponse(session_id=0))
    assert (build(handler, wanted(p0=1)).session_epoch, handler.session_id) == (0, 0)
