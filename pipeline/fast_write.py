"""Executor side: produce Spark's Arrow record batches to Ebb.

Spark hands each write task its rows as Arrow record batches (DataSourceArrowWriter). Where a row goes:
its `partition` column; else, with a key, Kafka's default partitioner (murmur2, the Java client's
hash); else round-robin over the topic's partitions within the task.

The fast path (one topic, from the 'topic' option or the only one, and no headers column): the
columns' Arrow buffers go to pipeline/_recordenc.c, which lays the rows out as records, per partition,
in C; protocol/records.py frames each full section as a batch (compressed as asked) and the project's
producer sends them, one Produce request per leader with a batch per partition, up to IN_FLIGHT
requests outstanding and one batch per partition at a time (a retried batch keeps its place), from an
event loop on a thread of its own so that sending overlaps Spark handing over the next rows. A
Python call per batch of ~BATCH_BYTES, none per row: taking rows apart in Python and one librdkafka
produce() call each cost ~3 µs a row, more than the broker.

Rows with a topic column and no 'topic' option, or with headers, go through librdkafka
(confluent-kafka), a produce() call per row, which builds, compresses and sends the batches in C.
Either way the first failure fails the task.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future

import pyarrow as pa
import pyarrow.compute as pc
import structlog

from client import Producer, TopicPartition
from client.errors import KafkaClientError
from protocol.compression import Compression
from protocol.records import batch_of_section

from .config import WriteConfig, cluster_options
from .loop_thread import LoopThread
from .options import EbbSourceError
from .planning import quiet_client_logs
from .worker_memory import keep_freed_memory

try:
    from . import _recordenc
except ImportError as exc:  # a checkout used without `pip install -e .`, or a build without a C compiler
    raise ImportError("pipeline/_recordenc.c is not built: run `pip install -e .` (it needs a C compiler and "
                      "Python's headers)") from exc

BATCH_BYTES = 256 * 1024  # under the broker's per-batch limits (max.message.bytes, small segment.bytes)
FLUSH_TIMEOUT_S = 120.0
IN_FLIGHT = 4  # Produce requests outstanding per task on the fast path (a partition in one at a time)

log = structlog.get_logger("ebb.pipeline")


class _Delivery:
    def __init__(self, config: WriteConfig):
        from confluent_kafka import Producer

        self.config = config
        self.failures: list[str] = []
        self.producer = Producer({
            "bootstrap.servers": config.bootstrap, "client.id": config.client["client_id"],
            "acks": str(config.acks), "partitioner": "murmur2_random", "batch.size": BATCH_BYTES,
            "linger.ms": 5, "compression.type": config.compression, "allow.auto.create.topics": False,
            "delivery.report.only.error": True, "log_level": 3,
            # order kept through retries as Spark's Kafka sink keeps it: idempotent when acks=all
            "enable.idempotence": config.acks == -1,
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


class _Encoded:
    """The fast path: rows to records in C, batches sent by the project's producer (module docstring).

    Order within a partition: the producer is not idempotent and retries a batch the broker refused
    without appending it (not the leader, not enough replicas), so a partition has at most one batch
    in flight; its next sections wait here (`held`) while other partitions' batches go. At most `count`
    sections wait before the writer waits for the oldest request."""

    def __init__(self, config: WriteConfig, topic: str):
        self.config, self.topic = config, topic
        self.compression = Compression[config.compression.upper()]
        self.producer = Producer(config.bootstrap, acks=config.acks, **cluster_options(config))
        self.in_flight: deque[tuple[Future, tuple[int, ...]]] = deque()  # a request and its partitions
        self.busy: set[int] = set()  # partitions with a batch in flight
        self.held: dict[int, deque[tuple[bytes, int]]] = {}  # partition -> sections waiting for it, in order
        self.held_count = 0
        self.loop = LoopThread("ebb-write")  # last: nothing above may leave its thread behind
        try:
            self.loop.call(self._start())
            self.count = self.loop.call(self._partition_count())
        except BaseException:
            self.close_after_error()
            raise
        self.encoder = _recordenc.encoder(self.count, BATCH_BYTES)

    async def _start(self) -> None:
        try:
            await self.producer.start()
        except KafkaClientError as exc:
            raise EbbSourceError(f"producing to Ebb failed: connecting to {self.config.bootstrap}: {exc}") from exc

    async def _partition_count(self) -> int:
        try:
            meta = await self.producer.cluster.refresh_metadata([self.topic])
        except KafkaClientError as exc:
            raise EbbSourceError(f"producing to Ebb failed: {exc}") from exc
        info = meta.topics.get(self.topic)
        if info is None or info.error != 0 or not info.partitions:
            raise EbbSourceError(f"topic {self.topic!r} does not exist on {self.config.bootstrap}")
        return len(info.partitions)

    def produce(self, batch: pa.RecordBatch) -> int:
        c = self.config
        if not batch.num_rows:
            return 0
        keys = _binary(batch.column(c.key_index)) if c.key_index is not None else None
        partitions = self._partitions(batch.column(c.partition_index)) if c.partition_index is not None else None
        self._send(_recordenc.add(self.encoder, batch.num_rows, _binary(batch.column(c.value_index)), keys,
                                  partitions))
        return batch.num_rows

    def _partitions(self, column: pa.Array) -> tuple | None:
        if column.null_count == len(column):
            return None
        column = pc.cast(column, pa.int64())
        low, high = pc.min_max(column).values()
        for bad in (low.as_py(), high.as_py()):
            if not 0 <= bad < self.count:
                raise EbbSourceError(f"a row names partition {bad} of {self.topic!r}, which has {self.count} "
                                     f"partitions")
        valid, data = column.buffers()
        return valid, data, column.offset

    def _send(self, sections: list[tuple[int, bytes, int]]) -> None:
        for partition, section, records in sections:
            self.held.setdefault(partition, deque()).append((section, records))
        self.held_count += len(sections)
        self._pump(self.count)

    def _pump(self, keep: int) -> None:
        """Send a request, a batch per partition, for the waiting sections of partitions with none in
        flight, up to IN_FLIGHT requests; return once at most `keep` sections wait (and, for 0, every
        request is answered), else wait for the oldest request."""
        while True:
            for entry in [e for e in self.in_flight if e[0].done()]:
                self.in_flight.remove(entry)
                self._check(entry)
            free = [p for p in self.held if p not in self.busy]
            if free and len(self.in_flight) < IN_FLIGHT:
                self._submit(free)
            elif self.held_count <= keep and (keep or not self.in_flight):
                return
            else:
                self._check(self.in_flight.popleft())

    def _submit(self, partitions: list[int]) -> None:
        now = int(time.time() * 1000)
        request: dict[TopicPartition, bytes] = {}
        for partition in partitions:
            waiting = self.held[partition]
            section, records = waiting.popleft()
            if not waiting:
                del self.held[partition]
            request[TopicPartition(self.topic, partition)] = batch_of_section(section, records, now,
                                                                               self.compression)
        self.held_count -= len(partitions)
        self.busy.update(partitions)
        self.in_flight.append((self.loop.submit(self.producer.send_built(request)), tuple(partitions)))

    def _check(self, entry: tuple[Future, tuple[int, ...]]) -> None:
        sent, partitions = entry
        where = f"{self.topic} partition{'s' if len(partitions) > 1 else ''} {', '.join(map(str, partitions))}"
        try:
            results = sent.result(timeout=FLUSH_TIMEOUT_S)
        except TimeoutError as exc:
            if not sent.done():  # popped from in_flight: close() would not cancel it
                sent.cancel()
                raise EbbSourceError(f"producing to Ebb failed: {where}: no answer in {FLUSH_TIMEOUT_S:g}s") from exc
            raise EbbSourceError(f"producing to Ebb failed: {where}: {exc or 'timed out'}") from exc
        except KafkaClientError as exc:
            raise EbbSourceError(f"producing to Ebb failed: {where}: {exc}") from exc
        self.busy.difference_update(partitions)
        for tp, result in results.items():
            if not result.ok:
                raise EbbSourceError(f"producing to Ebb failed: {tp.topic}-{tp.partition}: {result.error.name} "
                                     f"{result.error_message or ''}".rstrip())

    def finish(self) -> None:
        self._send(_recordenc.finish(self.encoder))
        self._pump(0)

    def close(self) -> None:
        for sent, _ in self.in_flight:
            sent.cancel()
        try:
            self.loop.call(self.producer.close())
        finally:
            self.loop.close()

    def close_after_error(self) -> None:
        """close() while an error propagates: a failure to close is logged, not raised over that error."""
        try:
            self.close()
        except Exception:
            log.warning("closing the writer after a failure failed too", exc_info=True)


def _binary(column: pa.Array) -> tuple:
    """A binary or string column as the encoder takes it: (validity, offsets, data, offset, wide). Only
    the offset-laid-out types: a view type also has three buffers, but no offsets to read."""
    kind = column.type
    wide = pa.types.is_large_binary(kind) or pa.types.is_large_string(kind)
    if not (wide or pa.types.is_binary(kind) or pa.types.is_string(kind)):
        raise EbbSourceError(f"the writer takes binary or string columns, not {kind}")
    valid, offsets, data = column.buffers()
    return valid if column.null_count else None, offsets, data if data is not None else b"", column.offset, wide


def write_batches(config: WriteConfig, batches: Iterable[pa.RecordBatch]) -> int:
    """Produce every row of `batches`; return how many. Raises on the first record the broker refuses."""
    keep_freed_memory()
    quiet_client_logs()  # runs in a Spark worker: its connections are not worth a line each
    topic = config.topic
    if topic is not None and config.headers_index is None:
        encoded = _Encoded(config, topic)
        try:
            written = sum(encoded.produce(batch) for batch in batches)
            encoded.finish()
        except BaseException:
            encoded.close_after_error()
            raise
        encoded.close()
        return written
    delivery = _Delivery(config)
    written = sum(delivery.produce(batch) for batch in batches)
    delivery.finish()
    return written
