"""Executor side: produce Spark's Arrow record batches to Ebb through librdkafka.

Spark hands each write task its rows as Arrow record batches (DataSourceArrowWriter); each column comes
out as one Python list and every row is one produce() call into librdkafka (confluent-kafka), which
builds, compresses and sends the batches in C. Where a row goes: its `partition` column; else, with a
key, Kafka's default partitioner (librdkafka's murmur2, the Java client's hash); else round-robin over
the topic's partitions within the task. Delivery reports come back for failures only; the first one
fails the task.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pyarrow as pa

from .config import WriteConfig
from .options import EbbSourceError

BATCH_BYTES = 256 * 1024  # under the broker's per-batch limits (max.message.bytes, small segment.bytes)
FLUSH_TIMEOUT_S = 120.0


class _Delivery:
    def __init__(self, config: WriteConfig):
        from confluent_kafka import Producer

        self.config = config
        self.failures: list[str] = []
        self.producer = Producer({
            "bootstrap.servers": config.bootstrap, "client.id": config.client["client_id"],
            "acks": str(config.acks), "partitioner": "murmur2_random", "batch.size": BATCH_BYTES,
            "linger.ms": 5, "compression.type": config.compression, "allow.auto.create.topics": False,
            "delivery.report.only.error": True, "enable.idempotence": False, "log_level": 3,
            "on_delivery": self._delivered, **config.security.librdkafka()})
        self.partition_counts: dict[str, int] = {}
        self.round_robin = itertools.count()

    def _delivered(self, error, message) -> None:
        if error is not None:
            self.failures.append(f"{message.topic()}-{message.partition()}: {error.name()} {error.str()}")

    def partitions(self, topic: str) -> int:
        if topic not in self.partition_counts:
            metadata = self.producer.list_topics(topic, timeout=30).topics.get(topic)
            if metadata is None or metadata.error is not None or not metadata.partitions:
                raise EbbSourceError(f"topic {topic!r} does not exist on {self.config.bootstrap}")
            self.partition_counts[topic] = len(metadata.partitions)
        return self.partition_counts[topic]

    def check(self) -> None:
        if self.failures:
            raise EbbSourceError(f"producing to Ebb failed: {'; '.join(self.failures[:5])}")

    def produce(self, batch: pa.RecordBatch) -> int:
        c = self.config
        rows = batch.num_rows
        values = batch.column(c.value_index).to_pylist()
        keys = batch.column(c.key_index).to_pylist() if c.key_index is not None else itertools.repeat(None)
        topics = batch.column(c.topic_index).to_pylist() if c.topic_index is not None and c.topic is None \
            else itertools.repeat(c.topic)
        partitions = batch.column(c.partition_index).to_pylist() if c.partition_index is not None \
            else itertools.repeat(None)
        headers = batch.column(c.headers_index).to_pylist() if c.headers_index is not None \
            else itertools.repeat(None)
        produce, poll = self.producer.produce, self.producer.poll
        for value, key, topic, partition, header in zip(values, keys, topics, partitions, headers,
                                                               strict=False):  # some are endless repeats
            if not topic:
                raise EbbSourceError("a row has a null topic and there is no 'topic' option")
            count = self.partitions(topic)
            if partition is None:
                partition = -1 if key is not None else next(self.round_robin) % count  # -1: the partitioner's
            elif not 0 <= partition < count:
                raise EbbSourceError(f"a row names partition {partition} of {topic!r}, which has {count} partitions")
            extra = {"headers": [(h["key"], h["value"]) for h in header]} if header else {}
            while True:
                try:
                    produce(topic, value, key, partition, **extra)
                    break
                except BufferError:  # librdkafka's queue is full: let it send
                    poll(0.05)
        poll(0)
        self.check()
        return rows

    def finish(self) -> None:
        left = self.producer.flush(FLUSH_TIMEOUT_S)
        self.check()
        if left:
            raise EbbSourceError(f"producing to Ebb failed: {left} records not delivered in {FLUSH_TIMEOUT_S:g}s")


def write_batches(config: WriteConfig, batches: Iterable[pa.RecordBatch]) -> int:
    """Produce every row of `batches`; return how many. Raises on the first record the broker refuses."""
    delivery = _Delivery(config)
    written = sum(delivery.produce(batch) for batch in batches)
    delivery.finish()
    return written
