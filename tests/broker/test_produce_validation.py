"""Produce against a real broker process: record timestamps against message.timestamp.after/before.max.ms
(INVALID_TIMESTAMP with Kafka's record errors) and the topic's compression.type (batches stored with
the topic's codec, their records, producer fields and offsets unchanged)."""

import time
from pathlib import Path

import pytest
from crc32c import crc32c

from protocol.errors import ErrorCode
from protocol.records import (
    DELETE_HORIZON_BIT,
    TRANSACTIONAL_BIT,
    Compression,
    RecordBatch,
    RecordBatchBuilder,
    iter_batches,
    with_records,
)
from tests.broker.data_wire import (
    batch,
    create_topic,
    fetch,
    init_producer_id,
    list_offsets,
    produce,
    produce_request,
)

HOUR = 3_600_000
_topics = iter(range(10_000))


def new_topic(client, configs=None) -> str:
    name = f"validate-{next(_topics)}"
    create_topic(client, name, 1, configs)
    return name


def now_ms() -> int:
    return int(time.time() * 1000)


def stored(client, topic):
    """(attributes, base offset, records) of each stored batch."""
    data = bytes(fetch(client, topic, 0, 0).records or b"")
    return [(b.attributes, b.base_offset, list(b.records())) for b in iter_batches(data)]


def test_a_future_timestamp_beyond_an_hour_is_refused_with_its_record_errors(client):
    topic = new_topic(client)
    now = now_ms()
    late = now + 2 * HOUR
    reply = produce(client, topic, 0, batch([b"a", b"b", b"c"], timestamps=[now, late, late + 1]))
    assert reply.error_code == ErrorCode.INVALID_TIMESTAMP
    assert reply.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in reply.record_errors] == [1, 2]
    text = reply.record_errors[0].batch_index_error_message
    assert text.startswith(f"Timestamp {late} of message with offset 1 is out of range. "
                           "The timestamp should be within [")
    low, high = (int(x) for x in text.rsplit("[", 1)[1].rstrip("]").split(", "))
    assert low + (2**63 - 1) == high - HOUR  # [now - before.max.ms (Long.MAX), now + after.max.ms]
    assert now <= high - HOUR <= now_ms()
    assert end_offset(client, topic) == 0


def end_offset(client, topic) -> int:
    return list_offsets(client, topic, 0, -1).offset


def test_within_the_hour_and_long_ago_are_accepted_by_default(client):
    topic = new_topic(client)
    now = now_ms()
    reply = produce(client, topic, 0, batch([b"a", b"b"], timestamps=[now + HOUR - 60_000, 946_684_800_000]))
    assert (reply.error_code, reply.base_offset) == (ErrorCode.NONE, 0)


def test_before_max_ms_refuses_old_records_even_behind_a_recent_base_timestamp(client):
    topic = new_topic(client, {"message.timestamp.before.max.ms": str(HOUR)})
    now = now_ms()
    old = now - 2 * HOUR
    reply = produce(client, topic, 0, batch([b"a", b"b", b"c"], timestamps=[now, old, now]))
    assert reply.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in reply.record_errors] == [1]
    assert produce(client, topic, 0, batch([b"d"], timestamps=[now])).error_code == ErrorCode.NONE
    assert produce(client, topic, 0, batch([b"e"], timestamps=[old])).error_code == ErrorCode.INVALID_TIMESTAMP


def test_after_max_ms_set_per_topic(client):
    topic = new_topic(client, {"message.timestamp.after.max.ms": "0"})
    assert produce(client, topic, 0, batch([b"a"], timestamps=[now_ms() + 60_000])).error_code == \
        ErrorCode.INVALID_TIMESTAMP
    assert produce(client, topic, 0, batch([b"a"], timestamps=[now_ms() - 1000])).error_code == ErrorCode.NONE


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD])
def test_a_compressed_batch_is_read_to_name_its_future_records(client, codec):
    topic = new_topic(client)
    now = now_ms()
    reply = produce(client, topic, 0, batch([b"a", b"b"], timestamps=[now + 3 * HOUR, now], compression=codec))
    assert reply.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in reply.record_errors] == [0]


def test_log_append_time_topics_take_any_timestamp(client):
    topic = new_topic(client, {"message.timestamp.type": "LogAppendTime"})
    reply = produce(client, topic, 0, batch([b"a"], timestamps=[now_ms() + 100 * HOUR]))
    assert reply.error_code == ErrorCode.NONE and reply.log_append_time_ms > 0


def test_keyless_and_future_records_on_a_compacted_topic_are_one_invalid_timestamp(client):
    topic = new_topic(client, {"cleanup.policy": "compact"})
    now = now_ms()
    reply = produce(client, topic, 0, batch([b"a", b"b"], keys=[None, b"k"], timestamps=[now, now + 2 * HOUR]))
    assert reply.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in reply.record_errors] == [0, 1]
    assert reply.record_errors[0].batch_index_error_message == \
        f"Compacted topic cannot accept message without key in topic partition {topic}-0"


def test_one_refused_partition_leaves_the_others_of_the_request(client):
    topic = f"validate-{next(_topics)}"
    create_topic(client, topic, 2)
    now = now_ms()
    request = produce_request(topic, 0, batch([b"x"], timestamps=[now + 5 * HOUR]), extra=[(1, batch([b"y"]))])
    answers = client.request(request, 9).responses[0].partition_responses
    assert [(a.index, a.error_code, a.base_offset) for a in answers] == \
        [(0, ErrorCode.INVALID_TIMESTAMP, -1), (1, ErrorCode.NONE, 0)]


# --- compression.type ------------------------------------------------------------------------------

@pytest.mark.parametrize(("target", "codec"), [("gzip", Compression.GZIP), ("snappy", Compression.SNAPPY),
                                                ("lz4", Compression.LZ4), ("zstd", Compression.ZSTD),
                                                ("uncompressed", Compression.NONE)])
@pytest.mark.parametrize("source", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_batches_are_stored_with_the_topic_codec(client, target, codec, source):
    topic = new_topic(client, {"compression.type": target})
    now = now_ms()
    sent = batch([b"a" * 100, b"b", None], keys=[b"k1", None, b"k3"], timestamps=[now, now - 5, now + 7],
                 compression=source)
    assert produce(client, topic, 0, batch([b"first"])).base_offset == 0
    reply = produce(client, topic, 0, sent)
    assert (reply.error_code, reply.base_offset) == (ErrorCode.NONE, 1)
    (a1, o1, r1), (a2, o2, r2) = stored(client, topic)
    assert a1 & 7 == codec and a2 & 7 == codec and (o1, o2) == (0, 1)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in r2] == \
        [(1, now, b"k1", b"a" * 100), (2, now - 5, None, b"b"), (3, now + 7, b"k3", None)]
    header = next(iter_batches(bytes(fetch(client, topic, 0, 1).records))).header()
    assert header.max_timestamp == now + 7 and header.base_timestamp == now


def test_producer_codec_keeps_the_bytes_as_sent(client):
    topic = new_topic(client)
    sent = batch([b"a", b"b"], compression=Compression.LZ4)
    produce(client, topic, 0, sent)
    got = bytes(fetch(client, topic, 0, 0).records)
    assert got[12:] == sent[12:] or got[17:] == sent[17:]  # base offset and leader epoch are the leader's


def test_an_idempotent_batch_keeps_its_producer_fields_and_is_deduplicated(client):
    topic = new_topic(client, {"compression.type": "zstd"})
    pid = init_producer_id(client).producer_id
    sent = batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)
    first = produce(client, topic, 0, sent)
    again = produce(client, topic, 0, sent)
    assert (first.error_code, first.base_offset, again.error_code, again.base_offset) == (0, 0, 0, 0)
    [b] = list(iter_batches(bytes(fetch(client, topic, 0, 0).records)))
    assert (b.compression, b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) == \
        (Compression.ZSTD, pid, 0, 0, False)
    follow = produce(client, topic, 0, batch([b"c"], producer_id=pid, producer_epoch=0, base_sequence=2))
    assert (follow.error_code, follow.base_offset) == (0, 2)


def test_log_append_time_is_stamped_on_the_recompressed_batch(client):
    topic = new_topic(client, {"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"})
    reply = produce(client, topic, 0, batch([b"a", b"b"], timestamps=[1000, 2000]))
    [b] = list(iter_batches(bytes(fetch(client, topic, 0, 0).records)))
    assert b.compression == Compression.GZIP and b.max_timestamp == reply.log_append_time_ms
    assert [r.timestamp for r in b.records()] == [reply.log_append_time_ms] * 2


def test_a_corrupt_batch_is_refused_before_recompression(client):
    topic = new_topic(client, {"compression.type": "gzip"})
    sent = bytearray(batch([b"a", b"b"]))
    sent[-1] ^= 0xFF
    assert produce(client, topic, 0, bytes(sent)).error_code == ErrorCode.CORRUPT_MESSAGE
    assert end_offset(client, topic) == 0


def test_recompressed_records_with_odd_deltas_are_rewritten(client):
    """A batch whose first record is not at delta 0: Kafka rewrites the records (deltas from the
    first record); timestamps and contents stay."""
    topic = new_topic(client, {"compression.type": "gzip"})
    builder = RecordBatchBuilder(delete_horizon_ms=3_000)  # base timestamp 3000: the first delta is 2000
    builder.append(None, b"x", (), 5_000)
    builder.append(None, b"y", (), 4_000)
    raw = bytearray(builder.build())
    raw[22] &= ~DELETE_HORIZON_BIT  # a producer's batch: only the base timestamp is odd
    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    assert produce(client, topic, 0, bytes(raw)).error_code == ErrorCode.NONE
    [(attributes, _, got)] = stored(client, topic)
    assert attributes & 7 == Compression.GZIP and [(r.value, r.timestamp) for r in got] == [(b"x", 5000), (b"y", 4000)]
    assert not attributes & TRANSACTIONAL_BIT


# --- decompression bombs, timestamps past Long.MAX, levels ---------------------------------------------

def _peak_rss(broker) -> int:
    """The broker process's peak resident memory so far (bytes)."""
    status = Path(f"/proc/{broker.process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024


def _bomb(codec: Compression, section: bytes, max_timestamp: int) -> bytes:
    """A one-record batch whose compressed record section is `section`."""
    return with_records(RecordBatch(batch([b"v"], compression=codec)), section, 1, max_timestamp)


# What a message.max.bytes of 1 MiB lets through per codec (snappy inflates least: tests/protocol/test_inflate.py)
BOMBS = {Compression.GZIP: 256 << 20, Compression.SNAPPY: 16 << 20, Compression.LZ4: 200 << 20,
         Compression.ZSTD: 512 << 20}


@pytest.mark.parametrize("codec", list(BOMBS), ids=lambda c: c.name)
def test_decompression_bombs_are_refused_without_inflating(broker, client, codec):
    """Zeros behind one declared record, and a sound record with zeros after it: INVALID_RECORD on a
    recompressing topic, a compacted one, and for a batch marked LogAppendTime, as Kafka answers; the
    broker's peak memory does not grow by the size they inflate to. One stored unread on a producer-codec
    topic is not inflated by ListOffsets either."""
    recompressing = new_topic(client, {"compression.type": "uncompressed"})
    compacted = new_topic(client, {"cleanup.policy": "compact"})
    plain = new_topic(client)
    now = now_ms()
    sound = bytes(RecordBatch(batch([b"v"], timestamps=[now])).body())
    zeros = _bomb(codec, bytes(BOMBS[codec]), now)
    left_over = _bomb(codec, sound + bytes(BOMBS[codec]), now)
    marked = bytearray(zeros)
    marked[22] |= 0x08  # the LogAppendTime attribute
    marked[17:21] = crc32c(bytes(marked[21:])).to_bytes(4, "big")
    before = _peak_rss(broker)
    for topic, sent in ((recompressing, zeros), (recompressing, left_over), (compacted, zeros),
                        (compacted, left_over), (plain, bytes(marked))):
        reply = produce(client, topic, 0, sent)
        assert (reply.error_code, reply.error_message, reply.log_start_offset) == (ErrorCode.INVALID_RECORD, None, 0)
        assert end_offset(client, topic) == 0
    assert produce(client, plain, 0, left_over).error_code == ErrorCode.NONE  # the producer's codec: unread
    assert list_offsets(client, plain, 0, -3).error_code == ErrorCode.NONE  # MAX_TIMESTAMP reads its batch
    grown = _peak_rss(broker) - before
    assert grown < 64 << 20, f"peak memory grew by {grown >> 20} MiB"


def test_timestamps_wrapping_past_long_max_are_kafkas_unknown_server_error_when_recompressed(client):
    """A base timestamp at Long.MAX - 3 and a delta of 7: the second record is at Long.MIN + 3 to Kafka,
    whose batch builder refuses a negative timestamp; a topic that keeps the batch's codec stores it."""
    raw = bytearray(batch([b"a", b"b"], timestamps=[0, 7]))
    raw[27:35] = raw[35:43] = (2**63 - 4).to_bytes(8, "big", signed=True)
    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    topic = new_topic(client, {"compression.type": "gzip", "message.timestamp.type": "LogAppendTime"})
    reply = produce(client, topic, 0, bytes(raw))
    assert (reply.error_code, reply.error_message, reply.log_start_offset) == \
        (ErrorCode.UNKNOWN_SERVER_ERROR, None, 0)
    kept = new_topic(client, {"message.timestamp.type": "LogAppendTime"})
    assert produce(client, kept, 0, bytes(raw)).error_code == ErrorCode.NONE


def test_zstd_level_minus_one_is_a_level(client):
    """Only gzip's -1 means its default: zstd's -1 is the fast level, not the default 3."""
    values = [bytes(range(256)) * 64 + b"%d" % i for i in range(50)]
    sizes = {}
    for level in ("-1", "3"):
        topic = new_topic(client, {"compression.type": "zstd", "compression.zstd.level": level})
        assert produce(client, topic, 0, batch(values)).error_code == ErrorCode.NONE
        [got] = list(iter_batches(bytes(fetch(client, topic, 0, 0).records)))
        assert [r.value for r in got.records()] == values
        sizes[level] = got.size
    assert sizes["-1"] != sizes["3"]
