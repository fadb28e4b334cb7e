"""Kafka as the judge of what Produce accepts and how it stores it: record timestamps against
`message.timestamp.after.max.ms` (Kafka 4's default, one hour) and `before.max.ms`, at every Produce
version both serve (record errors and messages exist from v8), uncompressed and compressed, on
CreateTime, LogAppendTime and compacted topics; and topics whose `compression.type` is a codec: the
batches as Fetch returns them (codec bits, offsets, timestamps, producer fields, records) after
batches of other codecs were produced, idempotent and transactional ones included.

Record timestamps are fixed once for the module (NOW) so both brokers get the same bytes; each answer's
bounds "[now - before, now + after]" hold each broker's own clock and are compared as their width."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import pytest
from crc32c import crc32c

from protocol.messages import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from protocol.records import TIMESTAMP_TYPE_BIT, Compression, RecordBatch, build_batch, iter_batches, with_records
from tests.differential.runner import Peer, compare
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

NOW = int(time.time() * 1000)
HOUR = 3_600_000
LONG_MAX = 2**63 - 1
ALLOWED: dict[tuple[str, str], str] = {
    ("idempotent out of order", "responses[codec-idempotent].partition_responses[0].error_message"):
        "Ebb words OUT_OF_ORDER_SEQUENCE_NUMBER (which sequence it expected); Kafka sends no message",
}
_BOUNDS = re.compile(r"within \[(-?\d+), (-?\d+)\]$")


def _java_long(value: int) -> int:
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


@dataclass
class Answer:
    """A Produce or Fetch answer with what each broker's clock writes normalised: the bounds of a record
    error (their width kept), and Fetch's record data decoded (no producer ids, which each hands out)."""

    answer: Any

    def to_dict(self) -> dict:
        found = self.answer.to_dict()
        for topic in found["responses"]:
            for partition in topic.get("partition_responses", []):
                for error in partition.get("record_errors") or []:
                    text = error["batch_index_error_message"] or ""
                    match = _BOUNDS.search(text)
                    if match:
                        width = _java_long(int(match[2]) - int(match[1]))
                        error["batch_index_error_message"] = _BOUNDS.sub(f"within <width {width}>", text)
            for partition in topic.get("partitions", []):
                partition["records"] = [_batch(b) for b in iter_batches(bytes(partition["records"] or b""))]
        return found


def _batch(batch) -> dict:
    if batch.is_control:  # a marker: written at each coordinator's own time
        return {"base_offset": batch.base_offset, "control": True, "producer_epoch": batch.producer_epoch}
    return {"base_offset": batch.base_offset, "last_offset_delta": batch.last_offset_delta,
            "records_count": batch.records_count, "compression": int(batch.compression),
            "timestamp_type": int(batch.timestamp_type), "transactional": batch.is_transactional,
            "control": batch.is_control, "producer_epoch": batch.producer_epoch,
            "base_sequence": batch.base_sequence, "base_timestamp": batch.header().base_timestamp,
            "max_timestamp": batch.max_timestamp if not batch.timestamp_type else "<append time>",
            "records": [(r.offset, r.timestamp if not batch.timestamp_type else "<append time>", r.key, r.value,
                         r.headers) for r in batch.records()]}


def create(peer: Peer, topic: str, partitions: int = 1, **configs: str) -> None:
    Topic = CreateTopicsRequest.CreatableTopic
    settings = [Topic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()]
    peer.ask(f"create {topic}", CreateTopicsRequest(topics=[Topic(name=topic, num_partitions=partitions,
                                                                  replication_factor=1, configs=settings)],
                                                    timeout_ms=30_000), 4)
    peer.wait_for_leaders(topic, partitions)


def produce(peer: Peer, label: str, topic: str, data: bytes, version: int = 9, partition: int = 0,
            transactional_id: str | None = None) -> Any:
    Data = ProduceRequest.TopicProduceData
    body = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=10_000, topic_data=[
        Data(name=topic, partition_data=[Data.PartitionProduceData(index=partition, records=data)])])
    return peer.record(label, Answer(peer.send(body, version))).answer


def _fetch_request(topic: str) -> FetchRequest:
    Part = FetchRequest.FetchTopic.FetchPartition
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                            Part(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])


def fetch(peer: Peer, label: str, topic: str) -> None:
    """Everything the partition holds, decoded."""
    peer.record(label, Answer(peer.send(_fetch_request(topic), 12)))


def batch(timestamps, *, keys=None, compression=Compression.NONE, **fields) -> bytes:
    keys = keys or [b"k%d" % i for i in range(len(timestamps))]
    return build_batch([(k, b"v%d" % i, [("h", b"x")] if i == 0 else [], t)
                        for i, (k, t) in enumerate(zip(keys, timestamps, strict=True))],
                       compression=compression, **fields)


def timestamps_at_every_version(peer: Peer) -> None:
    create(peer, "ts")
    for version in range(3, 12):
        produce(peer, f"v{version}: two records two hours ahead", "ts", batch([NOW, NOW + 2 * HOUR, NOW + 3 * HOUR]),
                version)
        produce(peer, f"v{version}: ten years ago and in the next minutes", "ts",
                batch([NOW - 10 * 365 * 24 * HOUR, NOW + 10 * 60_000]), version)
        produce(peer, f"v{version}: no timestamp", "ts", batch([-1, -1]), version)
    fetch(peer, "what ts holds", "ts")


def timestamps_compressed_and_per_topic(peer: Peer) -> None:
    create(peer, "ts-gzip")
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        produce(peer, f"{codec.name}: one of three ahead", "ts-gzip",
                batch([NOW, NOW + 5 * HOUR, NOW], compression=codec))
        produce(peer, f"{codec.name}: all inside", "ts-gzip", batch([NOW, NOW + 1000], compression=codec))
    fetch(peer, "what ts-gzip holds", "ts-gzip")
    create(peer, "ts-before", **{"message.timestamp.before.max.ms": str(HOUR),
                                 "message.timestamp.after.max.ms": "0"})
    produce(peer, "before: one old record behind a recent base", "ts-before", batch([NOW - 1000, NOW - 2 * HOUR]))
    produce(peer, "before: a lone old record", "ts-before", batch([NOW - 2 * HOUR]))
    produce(peer, "after 0: a record ahead of the clock", "ts-before", batch([NOW + 10 * 60_000]))
    produce(peer, "before: inside", "ts-before", batch([NOW - 1000, NOW - 2000]))
    create(peer, "ts-append", **{"message.timestamp.type": "LogAppendTime"})
    produce(peer, "LogAppendTime: far ahead is stamped", "ts-append", batch([NOW + 100 * HOUR]))
    fetch(peer, "what ts-append holds", "ts-append")
    create(peer, "ts-compact", **{"cleanup.policy": "compact"})
    produce(peer, "compacted: keyless and ahead", "ts-compact",
            batch([NOW, NOW + 2 * HOUR, NOW], keys=[None, b"k", None]))
    produce(peer, "compacted: keyless only", "ts-compact", batch([NOW, NOW], keys=[None, b"k"]))


def _marked_log_append_time(data: bytes, max_timestamp: int | None = None) -> bytes:
    """A producer's batch with the LogAppendTime bit set (and its max timestamp replaced)."""
    raw = bytearray(data)
    raw[22] |= TIMESTAMP_TYPE_BIT
    if max_timestamp is not None:
        raw[35:43] = max_timestamp.to_bytes(8, "big", signed=True)
    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    return bytes(raw)


def producer_batches_marked_log_append_time(peer: Peer) -> None:
    create(peer, "marked")
    create(peer, "marked-append", **{"message.timestamp.type": "LogAppendTime"})
    create(peer, "marked-gzip", **{"compression.type": "gzip"})
    for codec in (Compression.NONE, Compression.ZSTD):
        sent = batch([NOW - 5, NOW], compression=codec)
        produce(peer, f"{codec.name}: marked, inside", "marked", _marked_log_append_time(sent))
        produce(peer, f"{codec.name}: marked, ahead", "marked", _marked_log_append_time(sent, NOW + 2 * HOUR))
        produce(peer, f"{codec.name}: marked, no timestamp", "marked", _marked_log_append_time(sent, -1))
        produce(peer, f"{codec.name}: marked, to a LogAppendTime topic", "marked-append",
                _marked_log_append_time(sent))
        produce(peer, f"{codec.name}: marked, recompressed", "marked-gzip", _marked_log_append_time(sent))
        produce(peer, f"{codec.name}: marked, a null key", "marked-append",
                _marked_log_append_time(batch([NOW], keys=[None], compression=codec)))
    fetch(peer, "what marked holds", "marked")
    fetch(peer, "what marked-gzip holds", "marked-gzip")


def _producer_id(peer: Peer, transactional_id: str | None = None) -> int:
    if transactional_id:
        wait_for(lambda: peer.send(FindCoordinatorRequest(key=transactional_id, key_type=1), 3).error_code == 0,
                 timeout_s=60, what="a transaction coordinator")
    request = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000)
    reply = wait_for(lambda: (answer := peer.send(request, 4)).error_code == 0 and answer, timeout_s=60,
                     what="a producer id")
    return reply.producer_id


def recompression(peer: Peer) -> None:
    sources = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
    for target in ("gzip", "snappy", "lz4", "zstd", "uncompressed"):
        topic = f"codec-{target}"
        create(peer, topic, **{"compression.type": target})
        for source in sources:
            produce(peer, f"{target} from {source.name}", topic,
                    batch([NOW, NOW - 7, NOW + 3], keys=[b"a", None, b"c"], compression=source))
        fetch(peer, f"what {topic} holds", topic)
    create(peer, "codec-levels", **{"compression.type": "zstd", "compression.zstd.level": "19"})
    produce(peer, "zstd at level 19", "codec-levels", batch([NOW] * 20))
    produce(peer, "zstd below v7 to a zstd topic", "codec-levels", batch([NOW]), version=6)
    fetch(peer, "what codec-levels holds", "codec-levels")
    # Kafka 4 no longer answers Fetch below v10 with UNSUPPORTED_COMPRESSION_TYPE on a zstd topic
    peer.record("fetch v9 of a zstd topic", Answer(peer.send(_fetch_request("codec-levels"), 9)))
    create(peer, "codec-append", **{"compression.type": "lz4", "message.timestamp.type": "LogAppendTime"})
    produce(peer, "lz4 LogAppendTime", "codec-append", batch([NOW, NOW + 1]))
    fetch(peer, "what codec-append holds", "codec-append")
    create(peer, "codec-idempotent", **{"compression.type": "gzip"})
    pid = _producer_id(peer)
    first = batch([NOW, NOW], producer_id=pid, producer_epoch=0, base_sequence=0)
    produce(peer, "idempotent", "codec-idempotent", first)
    produce(peer, "idempotent retried", "codec-idempotent", first)
    produce(peer, "idempotent next", "codec-idempotent",
            batch([NOW], producer_id=pid, producer_epoch=0, base_sequence=2, compression=Compression.ZSTD))
    produce(peer, "idempotent out of order", "codec-idempotent",
            batch([NOW], producer_id=pid, producer_epoch=0, base_sequence=9))
    fetch(peer, "what codec-idempotent holds", "codec-idempotent")
    create(peer, "codec-txn", **{"compression.type": "snappy"})
    pid = _producer_id(peer, "codec-txn-id")
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    peer.ask("add codec-txn", AddPartitionsToTxnRequest(v3_and_below_transactional_id="codec-txn-id",
                                                        v3_and_below_producer_id=pid,
                                                        v3_and_below_producer_epoch=0,
                                                        v3_and_below_topics=[Topic(name="codec-txn",
                                                                                   partitions=[0])]), 3)
    produce(peer, "transactional", "codec-txn",
            batch([NOW, NOW], producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True),
            transactional_id="codec-txn-id")
    peer.ask("commit", EndTxnRequest(transactional_id="codec-txn-id", producer_id=pid, producer_epoch=0,
                                     committed=True), 3)
    wait_for(lambda: len(list(iter_batches(bytes(_fetched(peer, "codec-txn"))))) == 2, timeout_s=30,
             what="the commit marker")
    fetch(peer, "what codec-txn holds", "codec-txn")


def _bomb(codec: Compression, section: bytes) -> bytes:
    """A one-record batch of `codec` whose record section is `section`, however far it inflates."""
    return with_records(RecordBatch(batch([NOW], compression=codec)), section, 1, NOW)


def decompression_bombs(peer: Peer) -> None:
    """16 MiB of zeros behind one declared record, compressed: a record of length 0, or a sound record
    with the zeros left over. Read by the leader when it recompresses, on a compacted topic, and for a
    batch marked LogAppendTime (a producer-codec topic keeps other batches unread)."""
    create(peer, "bomb-uncompressed", **{"compression.type": "uncompressed"})
    create(peer, "bomb-compact", **{"cleanup.policy": "compact"})
    create(peer, "bomb-marked")
    record = bytes(RecordBatch(batch([NOW])).body())
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        for kind, section in (("zeros", b"\0" * (16 << 20)), ("left over", record + b"\0" * (16 << 20))):
            sent = _bomb(codec, section)
            produce(peer, f"{codec.name} {kind}: recompressed", "bomb-uncompressed", sent)
            produce(peer, f"{codec.name} {kind}: compacted", "bomb-compact", sent)
            produce(peer, f"{codec.name} {kind}: marked LogAppendTime", "bomb-marked", _marked_log_append_time(sent))
        produce(peer, f"{codec.name}: the sound record alone", "bomb-uncompressed", _bomb(codec, record))
    fetch(peer, "what bomb-uncompressed holds", "bomb-uncompressed")


def timestamps_near_long_max(peer: Peer) -> None:
    """A base timestamp near Long.MIN or Long.MAX and deltas that carry past it: the records' timestamps
    wrap as Java's long, are checked and recompressed so (after.max.ms at Long.MAX lets some pass)."""
    create(peer, "wrap-append", **{"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"})
    create(peer, "wrap-create", **{"compression.type": "gzip", "message.timestamp.after.max.ms": str(LONG_MAX)})
    create(peer, "wrap-plain")
    ahead = _with_base(batch([0, 7]), LONG_MAX - 3)  # the second record at Long.MIN + 3
    behind = _with_base(batch([10, 0]), -(2**63) + 2)  # the second record at Long.MAX - 7
    for label, sent in (("ahead", ahead), ("behind", behind)):
        for topic in ("wrap-append", "wrap-create", "wrap-plain"):
            produce(peer, f"{label} to {topic}", topic, sent)
            produce(peer, f"{label} marked LogAppendTime to {topic}", topic, _marked_log_append_time(sent))
    for topic in ("wrap-append", "wrap-create", "wrap-plain"):
        fetch(peer, f"what {topic} holds", topic)


def _with_base(data: bytes, base_timestamp: int) -> bytes:
    """`data` with another base timestamp (and that as its max), its deltas kept: each record's
    timestamp moves by the same amount, wrapping as Java's long."""
    raw = bytearray(data)
    raw[27:35] = base_timestamp.to_bytes(8, "big", signed=True)
    raw[35:43] = base_timestamp.to_bytes(8, "big", signed=True)
    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    return bytes(raw)


def _fetched(peer: Peer, topic: str) -> bytes:
    return bytes(peer.send(_fetch_request(topic), 12).responses[0].partitions[0].records or b"")


@pytest.mark.parametrize("scenario", [timestamps_at_every_version, timestamps_compressed_and_per_topic,
                                      producer_batches_marked_log_append_time, recompression,
                                      decompression_bombs, timestamps_near_long_max],
                         ids=lambda s: s.__name__)
def test_produce_validation_same_as_kafka(scenario, ebb_peer: Peer, kafka_peer: Peer) -> None:
    unexplained = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not unexplained, "\n".join(unexplained)
