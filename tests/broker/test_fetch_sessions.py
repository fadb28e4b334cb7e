"""Fetch sessions (KIP-227) against a real broker process: a full fetch asking for a session, incremental
fetches answering only what changed, forgotten partitions, closing, and every session error."""

import time
import uuid

import pytest

from protocol.errors import ErrorCode
from protocol.messages import DeleteTopicsRequest, FetchRequest
from tests.broker.data_wire import WireClient, batch, create_topic, delete_records, fetch_request, produce, values

_topics = iter(range(10_000))


def filled(client, partitions: int = 1, count: int = 3) -> tuple[str, uuid.UUID]:
    name = f"sessions-{next(_topics)}"
    topic_id = create_topic(client, name, partitions)
    for p in range(partitions):
        assert produce(client, name, p, batch([b"v%d" % i for i in range(count)])).error_code == 0
    return name, topic_id


def ask(client, topic, partitions, session_id: int, epoch: int, version: int, forget=()):
    """A fetch of (partition, offset) pairs in a session; `forget` lists partitions to drop from it."""
    request = fetch_request(topic, 0, 0, session_id=session_id, session_epoch=epoch,
                            partitions=[(p, offset, 1 << 20) for p, offset in partitions])
    if not partitions:
        request.topics = []
    if forget:
        gone = (FetchRequest.ForgottenTopic(topic_id=topic, partitions=list(forget)) if version >= 13
                else FetchRequest.ForgottenTopic(topic=topic, partitions=list(forget)))
        request.forgotten_topics_data = [gone]
    return client.request(request, version)


def answered(reply) -> dict[int, object]:
    return {p.partition_index: p for t in reply.responses for p in t.partitions}


@pytest.mark.parametrize("version", [7, 12, 13, 16])
def test_incremental_fetches_carry_only_what_changed(client, version):
    name, topic_id = filled(client, partitions=2)
    topic = topic_id if version >= 13 else name
    full = ask(client, topic, [(0, 0), (1, 0)], 0, 0, version)
    assert full.error_code == 0 and full.session_id > 0
    assert {p: len(values(d)) for p, d in answered(full).items()} == {0: 3, 1: 3}
    session = full.session_id
    # Both partitions move to the end of the log: nothing new, so nothing in the answer.
    quiet = ask(client, topic, [(0, 3), (1, 3)], session, 1, version)
    assert (quiet.error_code, quiet.session_id, quiet.responses) == (0, session, [])
    # Partitions left out of an incremental fetch are still fetched from their cached offsets.
    assert produce(client, name, 1, batch([b"new"])).error_code == 0
    changed = ask(client, topic, [], session, 2, version)
    parts = answered(changed)
    assert list(parts) == [1] and values(parts[1], 3) == [b"new"] and parts[1].high_watermark == 4
    # The high watermark already told and the cached offset past the data: quiet again.
    assert ask(client, topic, [(1, 4)], session, 3, version).responses == []


@pytest.mark.parametrize("version", [7, 13])
def test_forgotten_partitions_leave_the_session(client, version):
    name, topic_id = filled(client, partitions=2)
    topic = topic_id if version >= 13 else name
    session = ask(client, topic, [(0, 3), (1, 3)], 0, 0, version).session_id
    assert ask(client, topic, [], session, 1, version, forget=[0]).responses == []
    for p in (0, 1):
        assert produce(client, name, p, batch([b"x"])).error_code == 0
    assert list(answered(ask(client, topic, [], session, 2, version))) == [1]
    # Forgetting the last partition closes the session: a sessionless answer, then the id is gone.
    closing = ask(client, topic, [], session, 3, version, forget=[1])
    assert (closing.error_code, closing.session_id, closing.responses) == (0, 0, [])
    gone = ask(client, topic, [], session, 4, version)
    assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and gone.session_id == 0


def test_session_errors(client):
    name, topic_id = filled(client)
    session = ask(client, name, [(0, 3)], 0, 0, 12).session_id
    wrong = ask(client, name, [], session, 5, 12)
    assert (wrong.error_code, wrong.session_id, wrong.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    by_id = ask(client, topic_id, [], session, 1, 13)  # made with names, continued with ids
    assert by_id.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR and by_id.session_id == 0
    assert ask(client, name, [], session, 1, 12).error_code == 0  # the errors did not move the epoch
    unknown = ask(client, name, [], 0, 1, 12)
    assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and unknown.responses == []


@pytest.mark.parametrize("epoch", [0, -1])
def test_a_full_fetch_closes_the_session_it_names(client, epoch):
    name, _ = filled(client)
    session = ask(client, name, [(0, 3)], 0, 0, 12).session_id
    full = ask(client, name, [(0, 0)], session, epoch, 12)
    assert full.error_code == 0 and len(values(answered(full)[0])) == 3
    assert full.session_id != session and (full.session_id > 0) == (epoch == 0)
    assert ask(client, name, [], session, 1, 12).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_errors_are_always_answered(client):
    name, _ = filled(client)
    session = ask(client, name, [(0, 3)], 0, 0, 12).session_id
    past_end = ask(client, name, [(0, 9)], session, 1, 12)
    assert answered(past_end)[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    again = ask(client, name, [], session, 2, 12)  # the same error comes again, not left out
    assert answered(again)[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    back = ask(client, name, [(0, 3)], session, 3, 12)  # once it clears, the offsets are told again
    assert answered(back)[0].error_code == 0 and answered(back)[0].high_watermark == 3


def test_sessions_of_other_connections(broker, client):
    """A session is the broker's, not the connection's: a fetcher may continue it elsewhere."""
    name, _ = filled(client)
    session = ask(client, name, [(0, 3)], 0, 0, 12).session_id
    with WireClient(broker.port) as other:
        assert ask(other, name, [], session, 1, 12).error_code == 0
    assert ask(client, name, [], session, 1, 12).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH


# A consumer's session partition answered empty at the end of what it may read is not read again while
# nothing about it changed (k01_fetch._not_quiet); each change must still reach the next answer.

@pytest.mark.parametrize("version", [12, 13])
def test_a_quiet_partition_is_answered_again_when_its_log_start_moves(client, version):
    name, topic_id = filled(client, partitions=2)
    topic = topic_id if version >= 13 else name
    session = ask(client, topic, [(0, 3), (1, 3)], 0, 0, version).session_id
    assert ask(client, topic, [], session, 1, version).responses == []  # both quiet
    assert delete_records(client, name, 1, 2).error_code == 0
    parts = answered(ask(client, topic, [], session, 2, version))
    assert list(parts) == [1] and parts[1].log_start_offset == 2 and parts[1].high_watermark == 3
    assert ask(client, topic, [], session, 3, version).responses == []


@pytest.mark.parametrize("version", [12, 13])
def test_a_quiet_partition_of_a_deleted_topic_answers_its_error(client, version):
    name, topic_id = filled(client, partitions=1)
    topic = topic_id if version >= 13 else name
    session = ask(client, topic, [(0, 3)], 0, 0, version).session_id
    assert ask(client, topic, [], session, 1, version).responses == []
    [gone] = client.request(DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(
        name=name, topic_id=uuid.UUID(int=0))], timeout_ms=5000), 6).responses
    assert gone.error_code == 0
    parts = answered(ask(client, topic, [], session, 2, version))
    unknown = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert list(parts) == [0] and parts[0].error_code == unknown


def test_a_quiet_session_waits_for_data_and_answers_when_it_comes(broker, client):
    """Every partition quiet and MaxWaitMs set: the request parks on all of them and answers at the
    produce, long before MaxWaitMs."""
    name, _ = filled(client, partitions=3)
    session = ask(client, name, [(p, 3) for p in range(3)], 0, 0, 12).session_id
    assert ask(client, name, [], session, 1, 12).responses == []
    request = fetch_request(name, 0, 0, max_wait_ms=20_000, session_id=session, session_epoch=2)
    request.topics = []
    started = time.monotonic()
    correlation = client.submit(request, 12)
    with WireClient(broker.port) as other:
        assert produce(other, name, 2, batch([b"late"])).error_code == 0
    reply = client.receive(1, 12, correlation)
    assert time.monotonic() - started < 10
    parts = answered(reply)
    assert list(parts) == [2] and values(parts[2], 3) == [b"late"]


def test_quiet_and_changed_partitions_in_one_answer_keep_the_session_order(client):
    name, _ = filled(client, partitions=3)
    session = ask(client, name, [(p, 3) for p in range(3)], 0, 0, 12).session_id
    assert ask(client, name, [], session, 1, 12).responses == []
    for p in (2, 0):
        assert produce(client, name, p, batch([b"n%d" % p])).error_code == 0
    parts = answered(ask(client, name, [], session, 2, 12))
    assert list(parts) == [0, 2] and values(parts[0], 3) == [b"n0"] and values(parts[2], 3) == [b"n2"]
    # Read on from the new ends: quiet again, then the one that had stayed quiet gets data.
    assert ask(client, name, [(0, 4), (2, 4)], session, 3, 12).responses == []
    assert produce(client, name, 1, batch([b"n1"])).error_code == 0
    parts = answered(ask(client, name, [], session, 4, 12))
    assert list(parts) == [1] and values(parts[1], 3) == [b"n1"]
