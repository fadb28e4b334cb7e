"""Fetch against a real broker process: names and topic ids, offsets out of range, the high watermark
bound, KIP-74 size limits, isolation levels, sessionless answers (sessions: test_fetch_sessions.py),
and long polls woken by appends."""

import threading
import uuid

import pytest

from protocol.errors import ErrorCode
from tests.broker.data_wire import (
    WireClient,
    batch,
    create_topic,
    delete_records,
    fetch,
    fetch_request,
    produce,
    records,
    values,
)
from tests.support.broker_process import BrokerProcess

_topics = iter(range(10_000))


def new_topic(client, partitions: int = 1, configs=None) -> tuple[str, uuid.UUID]:
    name = f"fetch-{next(_topics)}"
    return name, create_topic(client, name, partitions, configs)


def filled(client, batches=((b"a", b"b"), (b"c",), (b"d", b"e", b"f"))) -> tuple[str, uuid.UUID]:
    name, topic_id = new_topic(client)
    for vals in batches:
        assert produce(client, name, 0, batch(list(vals))).error_code == 0
    return name, topic_id


@pytest.mark.parametrize("version", range(4, 17))
def test_every_served_version(client, version):
    name, topic_id = filled(client)
    part = fetch(client, topic_id if version >= 13 else name, 0, 0, version=version)
    assert part.error_code == 0 and values(part) == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert part.high_watermark == 6 and part.last_stable_offset == 6
    assert part.log_start_offset == (0 if version >= 5 else -1)


def test_the_broker_answers_what_the_python_encoder_writes(client):
    """The broker's answers, written by protocol/_fetch_write.c where it is built, are byte for byte what
    the Python encoder writes for the same answer: records, and each error path the handler answers."""
    from protocol import fastpath, framing

    name, topic_id = filled(client)
    cases = [
        (fetch_request(name, 0, 0), 4), (fetch_request(name, 0, 0), 11), (fetch_request(topic_id, 0, 0), 16),
        (fetch_request(name, 0, 0, isolation_level=1), 12),  # READ_COMMITTED: an empty aborted list
        (fetch_request(name, 0, 3), 11),  # from the middle of the log
        (fetch_request(name, 0, 6), 11),  # at the high watermark: no records
        (fetch_request(name, 0, 99), 11),  # OFFSET_OUT_OF_RANGE
        (fetch_request(name, 7, 0), 11),  # UNKNOWN_TOPIC_OR_PARTITION
        (fetch_request("no-such-topic", 0, 0), 12),
        (fetch_request(uuid.uuid4(), 0, 0), 13),  # UNKNOWN_TOPIC_ID
        (fetch_request(name, 0, 0, current_leader_epoch=99), 12),  # UNKNOWN_LEADER_EPOCH
        (fetch_request(name, 0, 0, partitions=[(0, 0, 10), (0, 2, 1 << 20), (5, 0, 10)]), 12),
    ]
    for request, version in cases:
        client.submit(request, version)
        frame = client.read_frame()
        correlation_id, answer = framing.decode_response(frame, 1, version)
        python = b"".join(fastpath.encode_fetch_response_in_python(answer, version, correlation_id))
        assert python[4:] == frame, (request, version)


def test_response_names_the_topic_the_way_it_was_asked(client):
    name, topic_id = filled(client)
    by_name = client.request(fetch_request(name, 0, 0), 12)
    by_id = client.request(fetch_request(topic_id, 0, 0), 16)
    assert by_name.responses[0].topic == name
    assert by_id.responses[0].topic_id == topic_id


def test_unknown_topics(client):
    assert fetch(client, "no-such-topic", 0, 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(client, uuid.uuid4(), 0, 0, version=16).error_code == ErrorCode.UNKNOWN_TOPIC_ID
    name, _ = filled(client)
    assert fetch(client, name, 3, 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_offset_out_of_range_carries_no_offsets(client):
    name, _ = filled(client)
    part = fetch(client, name, 0, 7)
    assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (-1, -1, -1)
    assert len(part.records or b"") == 0
    assert delete_records(client, name, 0, 3).error_code == 0
    below = fetch(client, name, 0, 2)
    assert below.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    at_start = fetch(client, name, 0, 3)
    assert at_start.log_start_offset == 3 and values(at_start, 3) == [b"d", b"e", b"f"]


def test_fetch_inside_a_batch_returns_the_whole_batch(client):
    name, _ = filled(client)
    part = fetch(client, name, 0, 4)
    assert [r.offset for r in records(part)] == [3, 4, 5]  # clients skip offset 3


def test_fetch_at_the_high_watermark_is_empty(client):
    name, _ = filled(client)
    part = fetch(client, name, 0, 6)
    assert part.error_code == 0 and len(part.records) == 0 and part.high_watermark == 6


def test_first_batch_is_returned_even_if_larger_than_the_limits(client):
    name, _ = new_topic(client, partitions=2)
    big = b"x" * 5000
    produce(client, name, 0, batch([big]))
    produce(client, name, 0, batch([b"small"]))
    produce(client, name, 1, batch([big]))
    part = fetch(client, name, 0, 0, partition_max_bytes=100, max_bytes=100)
    assert values(part) == [big]  # KIP-74: one batch, not the next one
    reply = client.request(fetch_request(name, 0, 0, max_bytes=100, partitions=[(0, 0, 100), (1, 0, 100)]), 12)
    first, second = reply.responses[0].partitions
    assert values(first) == [big] and len(second.records) == 0  # only the first partition may overshoot
    reply = client.request(fetch_request(name, 0, 0, partitions=[(0, 0, 1 << 20), (1, 0, 1 << 20)]), 12)
    assert [values(p) for p in reply.responses[0].partitions] == [[big, b"small"], [big]]


def test_max_bytes_stops_at_whole_batches(client):
    name, _ = new_topic(client)
    for i in range(10):
        produce(client, name, 0, batch([b"%04d" % i * 50]))
    one = len(bytes(fetch(client, name, 0, 0, partition_max_bytes=1).records))
    part = fetch(client, name, 0, 0, partition_max_bytes=3 * one + 10)
    assert len(records(part)) == 3


def test_large_reads_come_back_intact(client):
    name, _ = new_topic(client)
    payloads = [bytes([i]) * 100_000 for i in range(8)]  # 800 kB: read off the event loop
    for p in payloads:
        assert produce(client, name, 0, batch([p])).error_code == 0
    assert values(fetch(client, name, 0, 0, partition_max_bytes=10 << 20)) == payloads


@pytest.mark.parametrize("isolation, aborted", [(0, None), (1, [])])
def test_isolation_levels(client, isolation, aborted):
    name, _ = filled(client)
    part = fetch(client, name, 0, 0, isolation_level=isolation)
    assert part.last_stable_offset == part.high_watermark == 6
    assert part.aborted_transactions == aborted
    assert len(values(part)) == 6


def test_sessionless_fetches_get_no_session(client):
    name, _ = filled(client)
    reply = client.request(fetch_request(name, 0, 0, session_id=0, session_epoch=-1), 12)
    assert reply.error_code == 0 and reply.session_id == 0 and values(reply.responses[0].partitions[0])
    incremental = client.request(fetch_request(name, 0, 0, session_id=123, session_epoch=4), 12)
    assert incremental.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and incremental.responses == []


def test_leader_epoch_check(client):
    name, _ = filled(client)
    assert fetch(client, name, 0, 0, current_leader_epoch=0).error_code == 0
    assert fetch(client, name, 0, 0, current_leader_epoch=5).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_follower_fetch_from_a_broker_that_is_not_a_replica(client):
    name, _ = filled(client)
    assert fetch(client, name, 0, 0, replica_id=7).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_long_poll_returns_empty_after_max_wait(client):
    name, _ = filled(client)
    part = fetch(client, name, 0, 6, max_wait_ms=100)
    assert part.error_code == 0 and len(part.records) == 0


def test_long_poll_is_woken_by_an_append(broker, client):
    name, _ = filled(client)
    with WireClient(broker.port) as waiter:
        correlation_id = waiter.submit(fetch_request(name, 0, 6, max_wait_ms=120_000, min_bytes=1), 12)
        answer = {}
        thread = threading.Thread(target=lambda: answer.update(reply=waiter.receive(1, 12, correlation_id)))
        thread.start()
        assert produce(client, name, 0, batch([b"wake up"])).error_code == 0
        thread.join(60)
        assert not thread.is_alive(), "the parked fetch was not woken by the append"
    part = answer["reply"].responses[0].partitions[0]
    assert values(part) == [b"wake up"] and part.high_watermark == 7


def test_long_poll_waits_for_min_bytes(broker, client):
    name, _ = filled(client)
    with WireClient(broker.port) as waiter:
        correlation_id = waiter.submit(fetch_request(name, 0, 6, max_wait_ms=120_000, min_bytes=300), 12)
        answer = {}
        thread = threading.Thread(target=lambda: answer.update(reply=waiter.receive(1, 12, correlation_id)))
        thread.start()
        produce(client, name, 0, batch([b"tiny"]))       # below min_bytes: stays parked
        produce(client, name, 0, batch([b"y" * 400]))    # now enough
        thread.join(60)
        assert not thread.is_alive()
    assert values(answer["reply"].responses[0].partitions[0]) == [b"tiny", b"y" * 400]


def test_a_parked_fetch_does_not_delay_other_connections(broker, client):
    name, _ = filled(client)
    with WireClient(broker.port) as waiter:
        correlation_id = waiter.submit(fetch_request(name, 0, 6, max_wait_ms=120_000), 12)
        assert values(fetch(client, name, 0, 0)) == [b"a", b"b", b"c", b"d", b"e", b"f"]
        produce(client, name, 0, batch([b"g"]))
        assert values(waiter.receive(1, 12, correlation_id).responses[0].partitions[0]) == [b"g"]


def test_broker_stops_cleanly_with_a_parked_fetch(tmp_path):
    with BrokerProcess(tmp_path) as process:
        with WireClient(process.port) as c:
            create_topic(c, "parked", 1)
            c.submit(fetch_request("parked", 0, 0, max_wait_ms=120_000), 12)
            assert process.stop() == 0


def test_a_connections_kept_resolve_never_answers_stale(broker, client):
    """A consumer without a session has its resolve kept on its connection (broker/handlers/
    fetch_resolve.py); deleting, re-creating under the same name, growing the topic and deleting records
    each reach the next Fetch on that connection (one asking by name at v12, one by id at v16)."""
    from protocol.messages import CreatePartitionsRequest, DeleteTopicsRequest

    name, topic_id = filled(client)
    all_six = [b"a", b"b", b"c", b"d", b"e", b"f"]
    with WireClient(broker.port) as by_id:
        for _ in range(2):  # the second is served from what the first kept
            assert values(fetch(client, name, 0, 0)) == all_six
            assert values(fetch(by_id, topic_id, 0, 0, version=16)) == all_six
        assert delete_records(client, name, 0, 3).error_code == 0
        assert fetch(client, name, 0, 0).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert fetch(by_id, topic_id, 0, 0, version=16).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert fetch(client, name, 0, 3).log_start_offset == 3
        assert fetch(by_id, topic_id, 0, 3, version=16).log_start_offset == 3
        with WireClient(broker.port) as admin:
            answer = admin.request(DeleteTopicsRequest(topic_names=[name], timeout_ms=5000), 5)
            assert answer.responses[0].error_code == ErrorCode.NONE
            assert fetch(by_id, topic_id, 0, 3, version=16).error_code == ErrorCode.UNKNOWN_TOPIC_ID
            assert fetch(client, name, 0, 3).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert create_topic(admin, name, 1) != topic_id
            assert produce(admin, name, 0, batch([b"new"])).error_code == 0
        again = fetch(client, name, 0, 0)  # the new topic's partition, not the deleted one's
        assert (again.error_code, values(again), again.high_watermark) == (ErrorCode.NONE, [b"new"], 1)
        assert fetch(by_id, topic_id, 0, 0, version=16).error_code == ErrorCode.UNKNOWN_TOPIC_ID
    both = [(0, 0, 1 << 20), (1, 0, 1 << 20)]
    for _ in range(2):
        reply = client.request(fetch_request(name, 0, 0, partitions=both), 12)
        assert [p.error_code for p in reply.responses[0].partitions] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    with WireClient(broker.port) as admin:
        grown = admin.request(CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name=name, count=2, assignments=None)], timeout_ms=5000, validate_only=False), 3)
        assert grown.results[0].error_code == ErrorCode.NONE
    reply = client.request(fetch_request(name, 0, 0, partitions=both), 12)
    assert [p.error_code for p in reply.responses[0].partitions] == [0, 0]
