"""pipeline/fast_write.py's sending, against a stand-in producer (no broker, no Spark): a partition has
one batch in flight at a time, so a batch the producer retries after a backoff (NOT_ENOUGH_REPLICAS,
a leadership change) is not overtaken by the partition's next one, while other partitions' batches go
meanwhile; and its failures reach Spark as EbbSourceError naming where."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pyarrow as pa
import pytest

from client import ProduceResult
from client.errors import KafkaClientError
from pipeline import fast_write
from pipeline.config import WriteConfig
from pipeline.options import EbbSourceError
from protocol.errors import ErrorCode
from protocol.records import iter_batches


class FakeProducer:
    """Appends each batch when its request is answered; `first` decides how the first request goes."""

    instances: list[FakeProducer] = []
    first = "backoff"  # "backoff": answered after a retry's wait; "fail": a client error; "hang": never
    close_error = False

    def __init__(self, bootstrap, **options):
        self.cluster = self
        self.log: list[tuple[int, bytes]] = []  # (partition, value) in the order appended
        self.requests = 0
        self.cancelled = False
        FakeProducer.instances.append(self)

    async def start(self):
        return self

    async def close(self):
        if self.close_error:
            raise RuntimeError("close failed")

    async def refresh_metadata(self, topics):
        return SimpleNamespace(topics={"t": SimpleNamespace(error=0, partitions=[0, 1])})

    async def send_built(self, built):
        self.requests += 1
        if self.requests == 1:
            if self.first == "fail":
                raise KafkaClientError(ErrorCode.NETWORK_EXCEPTION, "connection lost")
            try:
                # the first request's batch was refused unappended and is retried after a backoff
                await asyncio.sleep(0.5 if self.first == "backoff" else 3600)
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        for tp, data in built.items():
            for batch in iter_batches(data):
                self.log.extend((tp.partition, r.value) for r in batch.records())
        return {tp: ProduceResult(0) for tp in built}


@pytest.fixture
def producer(monkeypatch):
    FakeProducer.instances.clear()
    monkeypatch.setattr(FakeProducer, "first", "backoff")
    monkeypatch.setattr(fast_write, "Producer", FakeProducer)
    monkeypatch.setattr(fast_write, "BATCH_BYTES", 64)  # a few records a batch
    return FakeProducer


def rows(partition: int, start: int, count: int) -> pa.RecordBatch:
    values = [b"p%d-%03d" % (partition, i) for i in range(start, start + count)]
    return pa.record_batch([pa.array(values, pa.binary()), pa.array([partition] * count, pa.int32())],
                           names=["value", "partition"])


CONFIG = WriteConfig("localhost:1", "t", value_index=0, key_index=None, topic_index=None, partition_index=1,
                     headers_index=None)


def test_a_retried_batch_is_not_overtaken_by_its_partitions_next(producer):
    batches = [rows(0, 0, 8), rows(1, 0, 8), rows(0, 8, 40)]  # 4 records a batch: 2, 2 and 10 batches
    assert fast_write.write_batches(CONFIG, batches) == 56
    [sent] = producer.instances
    for p, count in ((0, 48), (1, 8)):
        assert [v for q, v in sent.log if q == p] == [b"p%d-%03d" % (p, i) for i in range(count)]
    # partition 1 did not wait for partition 0's retried batch
    assert sent.log[0][0] == 1


def test_a_client_error_names_the_topic_and_partitions(producer, monkeypatch):
    monkeypatch.setattr(FakeProducer, "first", "fail")
    with pytest.raises(EbbSourceError, match=r"t partition 0: .*connection lost"):
        fast_write.write_batches(CONFIG, [rows(0, 0, 40)])


def test_a_request_never_answered_is_cancelled_and_named(producer, monkeypatch):
    monkeypatch.setattr(FakeProducer, "first", "hang")
    monkeypatch.setattr(fast_write, "FLUSH_TIMEOUT_S", 0.2)
    with pytest.raises(EbbSourceError, match=r"t partition 0: no answer in 0.2s"):
        fast_write.write_batches(CONFIG, [rows(0, 0, 40)])
    assert producer.instances[0].cancelled


def test_a_failing_close_does_not_hide_the_error(producer, monkeypatch):
    monkeypatch.setattr(FakeProducer, "first", "fail")
    monkeypatch.setattr(FakeProducer, "close_error", True)
    with pytest.raises(EbbSourceError, match="connection lost"):
        fast_write.write_batches(CONFIG, [rows(0, 0, 40)])
