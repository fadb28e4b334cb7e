"""A consumer's sessionless resolve kept on its connection (broker/handlers/fetch_resolve.py) is reused
only while nothing it read changed: a leader epoch bump, leadership lost, a truncated log and a log gone
offline each reach the next Fetch on the same connection. (Topic deletion, re-creation, growth and
DeleteRecords: tests/broker/test_fetch.py; ACLs: tests/security/test_acls.py; quotas:
tests/broker/test_client_quotas.py.)"""

import gc
import os
import uuid
import weakref

import pytest

from broker.handlers import fetch_resolve
from broker.handlers.k01_fetch import fetch
from broker.log import TopicPartition
from broker.request_context import RequestContext
from broker.resolve_generation import Generation
from broker.topic import Topic
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest
from protocol.records import RecordBatch, build_batch
from tests.unit.fakes import request_of
from tests.unit.leading_broker import FOLLOWER, LEADER, leading_broker


@pytest.fixture
async def broker(tmp_path):
    async with leading_broker(tmp_path, Topic("t", uuid.uuid4(), {0: [LEADER, FOLLOWER]})) as broker:
        partition = broker.replicas.partition("t", 0)
        for first in (0, 5):  # two batches: a truncation to 5 keeps the first
            data = build_batch([(None, b"v%d" % i, [], 1) for i in range(first, first + 5)])
            await partition.append_records_as_leader(memoryview(bytearray(data)), RecordBatch(data), required_acks=1)
        partition.followers[FOLLOWER].log_end_offset = 10  # the high watermark may reach 10
        partition.maybe_increment_high_watermark()
        yield broker, partition


async def _fetch(broker, connection: RequestContext, offset: int, leader_epoch: int = -1, version: int = 12,
                 partition: int = 0):
    asked = [FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchTopic.FetchPartition(
        partition=partition, current_leader_epoch=leader_epoch, fetch_offset=offset, partition_max_bytes=1 << 20)])]
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=asked)
    answer = await fetch(broker, request_of(request, version), connection)
    return answer.responses[0].partitions[0]


def _counting_lookups(broker, monkeypatch) -> list:
    """The lookups of partitions from now on, with the suite's check of a reuse off (it looks up too)."""
    monkeypatch.setattr(fetch_resolve, "CHECK_KEPT", False)
    calls: list = []
    real = broker.replicas.partition_of

    def partition_of(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(broker.replicas, "partition_of", partition_of)
    return calls


async def test_the_kept_resolve_is_reused_and_a_leader_epoch_bump_fences(broker, monkeypatch):
    broker, partition = broker
    epoch = partition.leader_epoch
    connection = RequestContext()
    lookups = _counting_lookups(broker, monkeypatch)
    for _ in range(3):
        answer = await _fetch(broker, connection, 0, epoch)
        assert (answer.error_code, answer.high_watermark) == (ErrorCode.NONE, 10)
    assert len(lookups) == 1  # the second and third were served from the kept resolve
    partition.make_leader(epoch + 1, {LEADER, FOLLOWER})
    assert (await _fetch(broker, connection, 0, epoch)).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (await _fetch(broker, connection, 0, epoch + 1)).error_code == ErrorCode.NONE
    assert (await _fetch(broker, connection, 0, epoch + 2)).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


async def test_leadership_lost_reaches_a_kept_resolve(broker):
    broker, partition = broker
    connection = RequestContext()
    for _ in range(2):
        assert (await _fetch(broker, connection, 0, version=10)).error_code == ErrorCode.NONE
    partition.make_follower(FOLLOWER, partition.leader_epoch + 1, {LEADER, FOLLOWER})
    assert (await _fetch(broker, connection, 0, version=10)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_a_truncated_or_offline_log_reaches_a_kept_resolve(broker):
    broker, partition = broker
    connection = RequestContext()
    for _ in range(2):
        assert (await _fetch(broker, connection, 8)).error_code == ErrorCode.NONE
    await partition.log.truncate_to(5)
    assert (await _fetch(broker, connection, 8)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (await _fetch(broker, connection, 0)).high_watermark == 5
    partition.log.mark_offline("a test's dead disk")
    assert (await _fetch(broker, connection, 0)).error_code == ErrorCode.KAFKA_STORAGE_ERROR


async def test_a_dir_failure_then_a_reload_reaches_a_kept_resolve(broker):
    """The probe's reload makes a new PartitionLog, and so a new Partition: a connection that kept the
    old one before the failure, and asked nothing meanwhile, reads the new one."""
    broker, partition = broker
    connection = RequestContext()
    for _ in range(2):
        assert (await _fetch(broker, connection, 0)).error_code == ErrorCode.NONE
    partition.log.mark_offline("a test's dead disk")
    assert await broker.logs._reload_offline()
    answer = await _fetch(broker, connection, 0)
    assert (answer.error_code, answer.high_watermark) == (ErrorCode.NONE, 10)
    assert broker.replicas.partition("t", 0) is not partition


async def test_an_idle_connection_pins_no_dropped_partition(tmp_path):
    """What a connection keeps cannot hold a Partition (and its log) the broker let go of."""
    async with leading_broker(tmp_path, Topic("t", uuid.uuid4(), {0: [LEADER, FOLLOWER]})) as broker:
        connection = RequestContext()
        for _ in range(2):
            assert (await _fetch(broker, connection, 0)).error_code == ErrorCode.NONE
        dropped = weakref.ref(broker.replicas.partition("t", 0))
        broker.replicas._forget(TopicPartition("t", 0))
        gc.collect()
        assert dropped() is None
        assert connection.fetch_resolve is not None  # still kept: the connection asked nothing since


async def test_the_kept_resolve_is_bounded(tmp_path, monkeypatch):
    """A connection asking for ever more partitions keeps at most KEPT_PARTITIONS_MAX of them, starting
    afresh with the request at hand past it (and still reusing what it kept then)."""
    monkeypatch.setattr(fetch_resolve, "KEPT_PARTITIONS_MAX", 2)
    replicas = {index: [LEADER, FOLLOWER] for index in range(3)}
    async with leading_broker(tmp_path, Topic("t", uuid.uuid4(), replicas)) as broker:
        connection = RequestContext()
        for index in (0, 1, 2, 2):
            assert (await _fetch(broker, connection, 0, partition=index)).error_code == ErrorCode.NONE
            kept = connection.fetch_resolve
            assert kept is not None
            assert sum(len(parts) for parts in kept.topics.values()) == kept.size <= 2
        assert kept is not None and list(kept.topics["t"]) == [2]
        lookups = _counting_lookups(broker, monkeypatch)
        assert (await _fetch(broker, connection, 0, partition=2)).error_code == ErrorCode.NONE
        assert lookups == []


def test_the_suite_checks_every_kept_resolve():
    """tests/conftest.py turns the check on for this process and the brokers the tests start."""
    assert fetch_resolve.CHECK_KEPT and os.environ[fetch_resolve.CHECK_ENV] == "1"


async def test_the_check_catches_a_change_the_counter_missed(broker, monkeypatch):
    broker, partition = broker
    connection = RequestContext()
    for _ in range(2):
        assert (await _fetch(broker, connection, 0, version=10)).error_code == ErrorCode.NONE
    monkeypatch.setattr(Generation, "bump", lambda self: None)  # a change that forgets the counter
    partition.make_follower(FOLLOWER, partition.leader_epoch + 1, {LEADER, FOLLOWER})
    before = fetch_resolve.mismatches
    with pytest.raises(AssertionError, match=fetch_resolve.MISMATCH):
        await _fetch(broker, connection, 0, version=10)
    assert fetch_resolve.mismatches == before + 1
    fetch_resolve.mismatches = before  # made on purpose: not a failure for tests/conftest.py


def test_the_compiled_reuse_answers_as_the_python_one():
    """broker/handlers/_fetch_reuse.c against fetch_resolve._reuse: random kept partitions (by topic id and
    by name, some dropped) and requests for kept ones, unkept ones and other leader epochs: the same None,
    or answer objects alike field by field, holding the same Partitions."""
    import random

    from broker.handlers.fetch_resolve import PartitionData, ResolvedFetch, TopicResponse, Wanted, _reuse
    from protocol.messages import FetchRequest

    assert fetch_resolve._compiled_reuse is not None  # built by make test's `pip install -e .`

    class Alive:  # stands for a Partition: only its identity and weak references matter here
        pass

    rng = random.Random(3)
    alive = [Alive() for _ in range(6)]
    answer_fields: tuple[str, ...] = PartitionData.__slots__
    answered = 0
    for _ in range(400):
        by_id = rng.random() < 0.5
        version = 16 if by_id else 12
        kept = ResolvedFetch(1, version, "User:A")
        names: list[uuid.UUID | str] = [uuid.uuid4() if by_id else f"t{i}" for i in range(3)]
        gone = Alive()
        for name in names:
            for index in range(rng.randint(0, 4)):
                partition = gone if rng.random() < 0.05 else rng.choice(alive)
                kept.topics.setdefault(name, {})[index] = (rng.randint(-1, 2),
                                                           weakref.ref(partition))  # type: ignore[arg-type]
        del gone
        asked = []
        for name in rng.sample(names, rng.randint(0, 3)):
            parts = [FetchRequest.FetchTopic.FetchPartition(
                partition=rng.randint(0, 4), current_leader_epoch=rng.randint(-1, 2),
                fetch_offset=rng.randint(0, 10**9), partition_max_bytes=rng.randint(0, 10**6),
                last_fetched_epoch=rng.randint(-1, 3)) for _ in range(rng.randint(0, 3))]
            asked.append(FetchRequest.FetchTopic(topic_id=name, partitions=parts) if isinstance(name, uuid.UUID)
                         else FetchRequest.FetchTopic(topic=name, partitions=parts))
        expected = _reuse(kept, asked, version)
        got = fetch_resolve._compiled_reuse(kept.topics, asked, by_id)
        if expected is None:
            assert got is None
            continue
        answered += 1
        (topics, wanted), (want_topics, want_wanted) = got, expected

        def topic_fields(t: TopicResponse) -> tuple:
            return (type(t), t.topic, t.topic_id, [[getattr(p, n) for n in answer_fields]
                                                   for p in t.partitions])

        assert [topic_fields(t) for t in topics] == [topic_fields(t) for t in want_topics]
        assert all(type(t) is TopicResponse for t in topics)
        assert [[getattr(w, n) for n in Wanted.__slots__ if n != "response"] for w in wanted] == \
               [[getattr(w, n) for n in Wanted.__slots__ if n != "response"] for w in want_wanted]
        # each Wanted answers into its own partition answer, the one listed under its topic
        assert [id(w.response) for w in wanted] == [id(p) for t in topics for p in t.partitions]
        assert all(type(w) is Wanted for w in wanted)
    assert answered > 40
