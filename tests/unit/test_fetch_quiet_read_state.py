"""A consumer's session partition is remembered as quiet (broker/handlers/fetch_quiet.py) in the state
its read saw, not the one it is in once the answer's bytes are ready: a leader epoch bump during that
await must reach the next fetch as FENCED_LEADER_EPOCH, as in Kafka, whose every fetch reads every
session partition. (Offsets moved meanwhile are already in that answer: _answer reads them after.)"""

import uuid

import pytest

from broker.fetch_sessions import FetchSessionCache
from broker.handlers.k01_fetch import fetch
from broker.request_context import RequestContext
from broker.topic import Topic
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest
from protocol.records import RecordBatch, build_batch
from tests.unit.fakes import request_of
from tests.unit.leading_broker import LEADER, leading_broker


@pytest.fixture
async def broker(tmp_path):
    async with leading_broker(tmp_path, Topic("t", uuid.uuid4(), {0: [LEADER]})) as broker:
        partition = broker.replicas.partition("t", 0)
        data = build_batch([(None, b"v%d" % i, [], 1) for i in range(10)])
        await partition.append_records_as_leader(memoryview(bytearray(data)), RecordBatch(data), required_acks=1)
        broker.fetch_sessions = FetchSessionCache(10)  # type: ignore[attr-defined]
        yield broker, partition


def _fetch(broker, session_id: int, epoch: int, leader_epoch: int, partitions=True):
    asked = [FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=leader_epoch, fetch_offset=10, partition_max_bytes=1 << 20)])]
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           session_id=session_id, session_epoch=epoch, topics=asked if partitions else [])
    return fetch(broker, request_of(request, 12), RequestContext())


def _during_the_send(broker, monkeypatch, change):
    """Runs `change` inside the handler's await for the answer's bytes, after its read."""
    replicas = broker.replicas
    real = replicas.slices_to_send

    async def slices_to_send(groups, regions):
        change()
        return await real(groups, regions)

    monkeypatch.setattr(replicas, "slices_to_send", slices_to_send)
    return lambda: monkeypatch.setattr(replicas, "slices_to_send", real)


async def test_a_leader_epoch_bump_during_the_send_is_fenced_next(broker, monkeypatch):
    broker, partition = broker
    epoch = partition.leader_epoch
    restore = _during_the_send(broker, monkeypatch, lambda: partition.make_leader(epoch + 1, {LEADER}))
    full = await _fetch(broker, 0, 0, epoch)
    restore()
    assert full.session_id > 0 and full.responses[0].partitions[0].error_code == ErrorCode.NONE
    parts = (await _fetch(broker, full.session_id, 1, epoch, partitions=False)).responses
    assert [p.error_code for t in parts for p in t.partitions] == [ErrorCode.FENCED_LEADER_EPOCH]

