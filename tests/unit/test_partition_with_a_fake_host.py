"""A Partition needs only its PartitionHost (broker/replica/partition.py), so a small fake stands in
for the ReplicaManager: the events it raises are recorded, ISR changes are asked of it, and blocking
work runs on its pool."""

import asyncio
import uuid
from dataclasses import replace

from broker.cluster.partition_state import PartitionState
from broker.config import TransactionConfig
from broker.log import LogConfig, LogManager, StartOffsetReason, TopicPartition
from broker.replica import AppendResult
from broker.replica.partition import Partition
from protocol.records import RecordBatch, build_batch

TP = TopicPartition("t", 0)


class FakeHost:
    node_id = 1
    producer_id_expiration_ms = TransactionConfig().producer_id_expiration_ms

    def __init__(self):
        self.events: list[tuple[str, int]] = []
        self.isr_changes: list[set[int]] = []
        self.alive = {1, 2}

    def leadership_changed(self, partition):
        self.events.append(("leadership", partition.leader_epoch))

    def appended(self, partition):
        self.events.append(("appended", partition.log.log_end_offset))

    def high_watermark_moved(self, partition):
        self.events.append(("high watermark", partition.high_watermark))

    def log_start_offset_moved(self, partition):
        self.events.append(("log start", partition.log_start_offset))

    def records_deleted(self, partition, reason, records, size):
        self.events.append(("deleted", records))

    def is_alive(self, broker_id):
        return broker_id in self.alive

    def request_isr_change(self, partition, isr):
        self.isr_changes.append(set(isr))

    async def run_io(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


async def test_a_leader_raises_its_events_to_the_host(tmp_path):
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    try:
        log_ = await logs.get_or_create_log(TP)
        host = FakeHost()
        partition = Partition(host, TP, uuid.uuid4(), [1, 2], log_,
                              PartitionState(leader=1, leader_epoch=3, isr=(1, 2), controller_epoch=1))
        data = build_batch([(None, b"v%d" % i, [], 1) for i in range(5)])
        await partition.append_records_as_leader(memoryview(bytearray(data)), RecordBatch(data), required_acks=1)
        assert ("appended", 5) in host.events
        assert partition.high_watermark == 0  # follower 2 is in the ISR and has fetched nothing

        partition.update_follower_state(2, fetch_offset=5, log_start_offset=0)
        assert ("high watermark", 5) in host.events

        assert partition.delete_records_on_leader(3, StartOffsetReason.CLIENT_RECORD_DELETION) == (3, True)
        assert ("deleted", 3) in host.events
        assert partition.low_watermark() == 0  # the follower still starts at 0
    finally:
        await logs.shutdown()


async def test_the_writer_is_told_where_its_batch_went_before_a_flush_is_awaited(tmp_path, monkeypatch):
    """With flush.messages reached, the batch was in the log (readable, replayable) while its writer
    still did not know its offset: a TxnOffsetCommit's pending offset kept record offset -1, so a
    tombstone written meanwhile did not drop it, though a replay of the log does."""
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    go = asyncio.Event()
    try:
        log_ = await logs.get_or_create_log(TP, config=replace(LogConfig(), flush_messages=1))
        partition = Partition(FakeHost(), TP, uuid.uuid4(), [1], log_,
                              PartitionState(leader=1, leader_epoch=3, isr=(1,), controller_epoch=1))
        flushing = asyncio.Event()
        flush = log_.flush

        async def held_flush():
            flushing.set()
            await go.wait()
            await flush()

        monkeypatch.setattr(log_, "flush", held_flush)
        told: list[AppendResult] = []
        data = build_batch([(None, b"v%d" % i, [], 1) for i in range(3)])
        appending = asyncio.ensure_future(partition.append_records_as_leader(
            memoryview(bytearray(data)), RecordBatch(data), 1, written=told.append))
        held = asyncio.ensure_future(flushing.wait())
        await asyncio.wait([appending, held], return_when=asyncio.FIRST_COMPLETED)
        assert held.done() and [(r.base_offset, r.last_offset) for r in told] == [(0, 2)]
        go.set()
        assert (await appending).base_offset == 0 and len(told) == 1
    finally:
        go.set()  # the shutdown flushes too
        await logs.shutdown()
