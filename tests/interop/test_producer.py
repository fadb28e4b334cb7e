"""KafkaProducer (kafka-clients 4.3.1) with its defaults — idempotent, acks=all — against Ebb.

500 records in batches (linger.ms=20) per compression type (none, gzip, snappy, lz4, zstd); every
send is acknowledged with the next offset, and a KafkaConsumer reads every key and value back in
order. One JVM runs the `producer` suite of ebb.interop.ProducerChecks.
"""

from __future__ import annotations

import struct

import pytest

COUNT = 500


@pytest.fixture(scope="module")
def steps(java, broker):
    return java.interop(broker.bootstrap, "producer", "producer")


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_producer_round_trip(steps, compression):
    assert steps.ok(f"produce_{compression}") == {
        "step": f"produce_{compression}", "sent": COUNT, "offsets_in_order": True, "read": COUNT,
        "values_match": True, "keys_match": COUNT}


CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# magic-2 batch header (Kafka's DefaultRecordBatch): baseOffset, batchLength, partitionLeaderEpoch,
# magic, crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordsCount
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")


def stored_batches(broker, topic: str) -> list[tuple]:
    data = (broker.data_dir / "logs" / f"{topic}-0" / f"{0:020d}.log").read_bytes()
    batches, position = [], 0
    while position + BATCH_HEADER.size <= len(data):
        header = BATCH_HEADER.unpack_from(data, position)
        batches.append(header)
        position += 12 + header[1]
    return batches


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_batches_are_stored_as_the_idempotent_producer_sent_them(steps, broker, compression):
    """The defaults really are idempotent (a producer id from InitProducerId, sequences from 0, no gaps),
    the producer batched, and each batch keeps the producer's compression codec."""
    steps.ok(f"produce_{compression}")
    batches = stored_batches(broker, f"producer-produce-{compression}")
    assert 1 < len(batches) < COUNT  # batched, not one record per request
    assert {b[9] for b in batches} != {-1} and len({b[9] for b in batches}) == 1  # one producer id, not -1
    assert {b[10] for b in batches} == {0}  # producer epoch
    sequence = offset = 0
    for base_offset, _, _, magic, _, attributes, last_delta, _, _, _, _, base_sequence, count in batches:
        assert (magic, attributes & 0x07) == (2, CODECS[compression])
        assert (base_offset, base_sequence, last_delta) == (offset, sequence, count - 1)
        offset += count
        sequence += count
    assert offset == COUNT
