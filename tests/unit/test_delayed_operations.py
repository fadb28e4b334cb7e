"""What a single broker cannot show through the wire: requests that wait for a follower.

A partition assigned to brokers 1 (here, the leader) and 2 (a follower that is alive but only
reports through the calls below). DeleteRecords waits for the low watermark, Produce acks=-1 for
the high watermark; both complete when the follower's fetch state moves and time out otherwise.
The handlers, ReplicaManager, Partition and PartitionLog are the real ones; only the broker shell
around them is a stand-in.
"""

import asyncio
import uuid
from dataclasses import replace

import pytest

from broker.handlers.k00_produce import produce
from broker.handlers.k21_delete_records import delete_records
from broker.log import TopicPartition
from broker.replica import AppendOrigin
from broker.request_context import RequestContext
from broker.topic import Topic
from protocol.errors import ErrorCode
from protocol.messages import DeleteRecordsRequest, ProduceRequest
from protocol.records import RecordBatch, build_batch
from tests.unit.fakes import request_of
from tests.unit.leading_broker import FOLLOWER, LEADER, leading_broker


@pytest.fixture
async def cluster(tmp_path):
    async with leading_broker(tmp_path, Topic("t", uuid.uuid4(), {0: [LEADER, FOLLOWER]})) as broker:
        partition = broker.replicas.partition("t", 0)
        data = build_batch([(None, b"v%d" % i, [], 1) for i in range(10)])
        await partition.append_records_as_leader(memoryview(bytearray(data)), RecordBatch(data), required_acks=1)
        yield broker, partition


def _delete(broker, offset, timeout_ms, version=2, leader_only=False):
    request = DeleteRecordsRequest(timeout_ms=timeout_ms, leader_only=leader_only, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name="t", partitions=[
            DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=offset)])])
    return delete_records(broker, request_of(request, version), RequestContext())


async def test_delete_records_times_out_while_an_alive_follower_lags(cluster):
    broker, partition = cluster
    reply = await _delete(broker, 4, timeout_ms=50, version=3)
    result = reply.topics[0].partitions[0]
    # the follower has not fetched since the leader took over: its log start offset is unknown (-1)
    assert (result.error_code, result.low_watermark, result.leader_log_start_offset) == \
        (ErrorCode.REQUEST_TIMED_OUT, -1, -1)
    assert partition.log_start_offset == 4  # the leader did move
    assert len(broker.replicas.deletions) == 0


async def test_delete_records_completes_when_the_follower_catches_up(cluster):
    broker, partition = cluster
    waiting = asyncio.ensure_future(_delete(broker, 4, timeout_ms=600_000, version=3))
    # parked once the moved start offset is durable (an fsync in the I/O pool: no fixed time on a busy machine)
    for _ in range(1000):
        if len(broker.replicas.deletions) == 1:
            break
        await asyncio.sleep(0.01)
    assert not waiting.done() and len(broker.replicas.deletions) == 1
    partition.update_follower_state(FOLLOWER, fetch_offset=10, log_start_offset=2)  # still short of 4
    await asyncio.sleep(0.05)
    assert not waiting.done()
    partition.update_follower_state(FOLLOWER, fetch_offset=10, log_start_offset=4)
    result = (await asyncio.wait_for(waiting, 10)).topics[0].partitions[0]
    assert (result.error_code, result.low_watermark, result.leader_log_start_offset) == (ErrorCode.NONE, 4, 4)


async def test_leader_only_does_not_wait_for_followers(cluster):
    broker, partition = cluster
    result = (await _delete(broker, 6, timeout_ms=600_000, version=3, leader_only=True)).topics[0].partitions[0]
    assert (result.error_code, result.leader_log_start_offset) == (ErrorCode.NONE, 6)
    assert result.low_watermark == -1  # the follower has not confirmed anything yet
    assert partition.log.durable_log_start_offset == 6


def _purgatory_must_stay_empty(broker, monkeypatch):
    async def no_waiting(*args, **kwargs):
        raise AssertionError("a delayed DeleteRecords was created")

    monkeypatch.setattr(broker.replicas.deletions, "wait", no_waiting)


async def test_leader_only_never_enters_the_purgatory(cluster, monkeypatch):
    """KIP-1343's test plan: leader-only answers without enrolling a delayed operation."""
    broker, partition = cluster
    _purgatory_must_stay_empty(broker, monkeypatch)
    result = (await _delete(broker, 3, timeout_ms=600_000, version=3, leader_only=True)).topics[0].partitions[0]
    assert (result.error_code, result.leader_log_start_offset) == (ErrorCode.NONE, 3)


@pytest.mark.parametrize("version", [2, 3])
async def test_timeout_zero_answers_with_what_is_known_without_parking(cluster, monkeypatch, version):
    """KAFKA-20560: TimeoutMs=0 on the all-replica path is REQUEST_TIMED_OUT at once where the low
    watermark is short; the leader has moved all the same."""
    broker, partition = cluster
    partition.update_follower_state(FOLLOWER, fetch_offset=10, log_start_offset=2)
    _purgatory_must_stay_empty(broker, monkeypatch)
    result = (await _delete(broker, 5, timeout_ms=0, version=version)).topics[0].partitions[0]
    assert (result.error_code, result.low_watermark) == (ErrorCode.REQUEST_TIMED_OUT, 2)
    if version >= 3:
        assert result.leader_log_start_offset == -1  # -1 with every error
    assert partition.log_start_offset == 5


async def test_dead_followers_do_not_hold_deletion_back(cluster):
    broker, partition = cluster
    broker.replicas.is_alive = lambda broker_id: broker_id == LEADER
    result = (await _delete(broker, 5, timeout_ms=600_000)).topics[0].partitions[0]
    assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 5)


def _produce(broker, timeout_ms):
    request = ProduceRequest(acks=-1, timeout_ms=timeout_ms, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
            index=0, records=build_batch([(None, b"more", [], 1)]))])])
    return produce(broker, request_of(request, 9), RequestContext())


async def _parked(purgatory, key, waiting) -> None:
    """Until `purgatory` holds a waiter for `key` (the request really parked there, not merely slow to
    answer); fails if the request answers first."""
    async with asyncio.timeout(10):
        while not purgatory.watched(key):
            assert not waiting.done(), waiting.result()
            await asyncio.sleep(0)  # a turn of the loop, no time passes
    assert not waiting.done()


async def test_acks_all_waits_for_the_isr(cluster):
    broker, partition = cluster
    partition.make_leader(partition.leader_epoch, {LEADER, FOLLOWER})
    partition.update_follower_state(FOLLOWER, fetch_offset=10, log_start_offset=0)
    timed_out = (await _produce(broker, 50)).responses[0].partition_responses[0]
    assert (timed_out.error_code, timed_out.base_offset) == (ErrorCode.REQUEST_TIMED_OUT, 10)
    waiting = asyncio.ensure_future(_produce(broker, 600_000))
    await _parked(broker.replicas.produces, partition.topic_partition, waiting)
    partition.update_follower_state(FOLLOWER, fetch_offset=12, log_start_offset=0)
    done = (await asyncio.wait_for(waiting, 10)).responses[0].partition_responses[0]
    assert (done.error_code, done.base_offset) == (ErrorCode.NONE, 11)
    assert partition.high_watermark == 12


async def test_a_writer_learns_where_its_batch_went_before_the_acks_wait_ends(cluster):
    """The group store's TxnOffsetCommit needs its records' offsets as soon as they are in the log: a
    marker after them may be reported (its own wait over) before this wait's task resumes."""
    broker, partition = cluster
    partition.make_leader(partition.leader_epoch, {LEADER, FOLLOWER})
    partition.update_follower_state(FOLLOWER, fetch_offset=10, log_start_offset=0)
    told = []
    data = build_batch([(None, b"x", [], 1)])
    waiting = asyncio.ensure_future(broker.replicas.append_records(
        [("t", 0, memoryview(bytearray(data)), RecordBatch(data))], required_acks=-1, timeout_ms=600_000,
        origin=AppendOrigin.COORDINATOR, appended=lambda position, result: told.append((position, result.base_offset))))
    await _parked(broker.replicas.produces, partition.topic_partition, waiting)
    assert told == [(0, 10)]
    partition.update_follower_state(FOLLOWER, fetch_offset=11, log_start_offset=0)
    [result] = await asyncio.wait_for(waiting, 10)
    assert (result.error_code, result.base_offset, told) == (ErrorCode.NONE, 10, [(0, 10)])


async def test_acks_all_after_the_isr_shrank_below_the_minimum(cluster):
    """Kafka's checkEnoughReplicasReachOffset: a batch appended with two in sync (min.insync.replicas
    2) whose ISR shrinks to the leader while it waits is NOT_ENOUGH_REPLICAS_AFTER_APPEND, with its
    offsets; the next acks=-1 batch is NOT_ENOUGH_REPLICAS before the append."""
    broker, partition = cluster
    partition.log.config = replace(partition.log.config, min_insync_replicas=2)
    partition.make_leader(partition.leader_epoch, {LEADER, FOLLOWER})
    partition.update_follower_state(FOLLOWER, fetch_offset=10, log_start_offset=0)
    waiting = asyncio.ensure_future(_produce(broker, 600_000))
    await _parked(broker.replicas.produces, partition.topic_partition, waiting)
    partition.isr = {LEADER}  # the cluster dropped the follower
    partition.maybe_increment_high_watermark()
    answer = (await asyncio.wait_for(waiting, 10)).responses[0].partition_responses[0]
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 10)
    refused = (await _produce(broker, 600_000)).responses[0].partition_responses[0]
    assert (refused.error_code, refused.base_offset) == (ErrorCode.NOT_ENOUGH_REPLICAS, -1)
    assert partition.log.log_end_offset == 11


async def test_an_io_error_takes_its_log_dir_offline(tmp_path):
    """An I/O failure under one partition (its active segment's descriptor swapped for a read-only one,
    so the append's write fails) takes the whole log dir offline, as Kafka's log dir failure does: that
    partition and its neighbour on the same dir answer KAFKA_STORAGE_ERROR to Produce and Fetch (an
    error code each, never a closed connection) until the dir's probe finds it healthy."""
    import os

    from broker.handlers.k01_fetch import fetch
    from protocol.messages import FetchRequest

    async with leading_broker(tmp_path, Topic("s", uuid.uuid4(), {0: [LEADER], 1: [LEADER]})) as broker:
        log = broker.logs.get_log(TopicPartition("s", 0))
        assert log is not None
        segment_file = log.segments[-1].file
        read_only = os.open(segment_file.path, os.O_RDONLY)
        os.dup2(read_only, segment_file.fd)
        os.close(read_only)
        data = build_batch([(None, b"x", [], 1)])
        request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name="s", partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=data)
                                      for i in (0, 1)])])
        # the handlers take the whole BrokerContext; LeadingBroker holds what they read here
        reply = await produce(broker, request_of(request, 9), RequestContext())  # type: ignore[arg-type]
        assert reply is not None  # acks=1: answered
        assert [r.error_code for r in reply.responses[0].partition_responses] == \
            [ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.KAFKA_STORAGE_ERROR]
        fetch_request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, topics=[FetchRequest.FetchTopic(
            topic="s", partitions=[FetchRequest.FetchTopic.FetchPartition(partition=i, fetch_offset=0,
                                                                          partition_max_bytes=1 << 20)
                                   for i in (0, 1)])])
        answer = await fetch(broker, request_of(fetch_request, 12), RequestContext())  # type: ignore[arg-type]
        parts = answer.responses[0].partitions
        assert [p.error_code for p in parts] == [ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.KAFKA_STORAGE_ERROR]


def _follower_fetch(broker, offset, last_fetched_epoch, log_start_offset=0):
    from broker.handlers.k01_fetch import fetch
    from protocol.messages import FetchRequest

    wanted = FetchRequest.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=last_fetched_epoch,
        log_start_offset=log_start_offset, partition_max_bytes=1 << 20)
    request = FetchRequest(replica_id=FOLLOWER, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="t",
                                                                                          partitions=[wanted])])
    return fetch(broker, request_of(request, 12), RequestContext())


async def test_a_follower_position_counts_only_where_its_fetch_read_this_log(cluster):
    """Kafka's updateFollowerFetchState: a fetch that diverges (its last epoch ends earlier here) or
    asks past the log end says nothing about what the follower holds, so it cannot raise the high
    watermark, rejoin the ISR or count for the low watermark."""
    broker, partition = cluster
    follower = partition.followers[FOLLOWER]
    epoch = partition.leader_epoch
    diverging = (await _follower_fetch(broker, 1000, epoch + 5)).responses[0].partitions[0]
    assert diverging.diverging_epoch.end_offset == 10
    beyond = (await _follower_fetch(broker, 1000, -1)).responses[0].partitions[0]
    assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (follower.log_end_offset, follower.log_start_offset) == (-1, -1)
    valid = (await _follower_fetch(broker, 10, epoch, log_start_offset=3)).responses[0].partitions[0]
    assert valid.error_code == ErrorCode.NONE
    assert (follower.log_end_offset, follower.log_start_offset) == (10, 3)


async def test_a_parked_follower_fetch_learns_a_new_log_start_offset_at_once(cluster):
    """Issue 19: a move of the leader's log start offset completes the follower's parked Fetch with the
    new LogStartOffset, so the follower makes it durable and reports it within a round trip; a
    consumer's parked fetch keeps waiting."""
    from broker.handlers.k01_fetch import fetch
    from protocol.messages import FetchRequest

    broker, partition = cluster
    partition.update_follower_state(FOLLOWER, fetch_offset=10, log_start_offset=0)  # in sync: HW 10

    def parked_fetch(replica_id):
        wanted = FetchRequest.FetchTopic.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=10, last_fetched_epoch=-1, log_start_offset=0,
            partition_max_bytes=1 << 20)
        request = FetchRequest(replica_id=replica_id, max_wait_ms=600_000, min_bytes=1, max_bytes=1 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1,
                               topics=[FetchRequest.FetchTopic(topic="t", partitions=[wanted])])
        return asyncio.ensure_future(fetch(broker, request_of(request, 12), RequestContext()))

    follower_fetch, consumer_fetch = parked_fetch(FOLLOWER), parked_fetch(-1)
    await asyncio.sleep(0.05)
    assert not follower_fetch.done() and not consumer_fetch.done()
    await _delete(broker, 4, timeout_ms=0, version=3, leader_only=True)
    answer = (await asyncio.wait_for(follower_fetch, 10)).responses[0].partitions[0]
    assert (answer.error_code, answer.log_start_offset, len(answer.records)) == (ErrorCode.NONE, 4, 0)
    await asyncio.sleep(0.05)
    assert not consumer_fetch.done()
    consumer_fetch.cancel()
