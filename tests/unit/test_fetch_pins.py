"""A Fetch's read keeps each segment file it returns pinned once (PartitionLog.read(pinned=True)) and
hands that pin to the answer's FileRegion, or lets it go: after a copied answer, an answer from files
once its regions are released, a long poll whose wait re-planned the reads, a poll cancelled while it
waits and a read that failed, no segment file of the partition is left pinned."""

import asyncio
import uuid

import pytest

from broker.handlers.k01_fetch import fetch
from broker.request_context import RequestContext
from broker.topic import Topic
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest
from protocol.records import RecordBatch, build_batch
from tests.unit.fakes import request_of
from tests.unit.leading_broker import LEADER, leading_broker


async def _append(partition, records: int, value: bytes = b"v" * 1000) -> None:
    data = build_batch([(None, value, [], 1) for _ in range(records)])
    await partition.append_records_as_leader(memoryview(bytearray(data)), RecordBatch(data), required_acks=1)


@pytest.fixture
async def broker(tmp_path):
    async with leading_broker(tmp_path, Topic("t", uuid.uuid4(), {0: [LEADER]})) as broker:
        partition = broker.replicas.partition("t", 0)
        for _ in range(5):
            await _append(partition, 20)  # 5 batches of ~20 KB
        yield broker, partition


def _pins(partition) -> int:
    return sum(segment.file._pins for segment in partition.log.segments)


def _fetch(broker, offset: int, context: RequestContext, *, min_bytes: int = 1, wait_ms: int = 0):
    asked = [FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=offset, partition_max_bytes=1 << 20)])]
    request = FetchRequest(replica_id=-1, max_wait_ms=wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                           isolation_level=1, session_id=0, session_epoch=-1, topics=asked)
    return fetch(broker, request_of(request, 12), context)


@pytest.mark.parametrize("from_files", [False, True])
async def test_an_answer_leaves_no_pin(broker, from_files):
    broker, partition = broker
    context = RequestContext()
    if from_files:
        context.file_regions = []
    answer = await _fetch(broker, 0, context)
    assert answer.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert len(answer.responses[0].partitions[0].records) > 90_000
    if from_files:  # held by the regions until the connection has sent them
        assert context.file_regions and _pins(partition) == len(context.file_regions)
        for region in context.file_regions:
            region.release()
    assert _pins(partition) == 0


async def test_a_long_poll_that_read_again_leaves_no_pin(broker):
    broker, partition = broker
    end = partition.log.log_end_offset
    waiting = asyncio.ensure_future(_fetch(broker, end - 20, RequestContext(), min_bytes=60_000, wait_ms=10_000))
    await asyncio.sleep(0.05)
    assert not waiting.done() and _pins(partition) == 1  # the read it planned, kept for the answer
    await _append(partition, 20)  # not enough yet: read again
    await asyncio.sleep(0.05)
    assert not waiting.done() and _pins(partition) == 1
    await _append(partition, 30)
    answer = await waiting
    assert len(answer.responses[0].partitions[0].records) >= 60_000
    assert _pins(partition) == 0


async def test_a_long_poll_cancelled_while_it_waits_leaves_no_pin(broker):
    broker, partition = broker
    end = partition.log.log_end_offset
    waiting = asyncio.ensure_future(_fetch(broker, end - 20, RequestContext(), min_bytes=1 << 20, wait_ms=10_000))
    await asyncio.sleep(0.05)
    assert _pins(partition) == 1
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert _pins(partition) == 0


async def test_an_offset_out_of_range_pins_nothing(broker):
    broker, partition = broker
    answer = await _fetch(broker, partition.log.log_end_offset + 5, RequestContext())
    assert answer.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert _pins(partition) == 0
