"""Reading a compacted topic whose cleaner has left gaps in its offsets.

As Spark's Kafka connector does (KafkaDataConsumer.fetchRecord: an offset at or above the log start
whose record is not there is invisible, skipped, and not counted as data loss), offsets missing in a
compacted topic neither fail the read (failOnDataLoss is true by default), nor stall it, nor are
reported as lost: a range wholly inside a gap gives no rows at once, and a stream whose triggers cut
the log into small ranges reads every surviving record once.
"""

from __future__ import annotations

import json
import time

from tests.pipeline.helpers import consume_all, create_topic, produce, read_batch, rows_by_offset
from tests.pipeline.test_stream import run_collecting, stream

TOPIC = "compacted-gaps"
KEYS = 3
ROUNDS = 12
CLEANED_WITHIN_S = 60.0


def _compacted_log(bootstrap: str) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of what the cleaner leaves once it has cleaned every closed segment."""
    create_topic(bootstrap, TOPIC, configs={"cleanup.policy": "compact", "segment.bytes": "600",
                                            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    produced: list[tuple[int, bytes, bytes]] = []
    for n in range(ROUNDS):  # one batch a round, every key updated; 331 to 406 bytes: one batch a segment
        once = [(f"once{n}".encode(), b"stays")] if n % 4 == 1 else []  # a survivor between gaps
        records = once + [(f"k{k}".encode(), f"v{n}-{k}".encode() * 20) for k in range(KEYS)]
        produce(bootstrap, {(TOPIC, 0): records})
        produced += [(len(produced) + i, key, value) for i, (key, value) in enumerate(records)]
    # the last round's batch is the active segment, never cleaned; of the closed ones each key's latest stays
    last_round = len(produced) - KEYS
    latest = {key: (offset, key, value) for offset, key, value in produced[:last_round]}
    expected = sorted(latest.values()) + produced[last_round:]
    deadline = time.monotonic() + CLEANED_WITHIN_S
    while (left := [(r.offset, r.key, r.value) for r in consume_all(bootstrap, TOPIC)]) != expected:
        assert time.monotonic() < deadline, f"not cleaned as expected after {CLEANED_WITHIN_S:g}s: {left}"
        time.sleep(0.2)  # polling the broker's state: the cleaner's rounds run in another process
    return left


def test_gaps_of_a_compacted_topic_are_neither_lost_nor_fatal(spark, bootstrap, tmp_path):
    left = _compacted_log(bootstrap)
    offsets = [offset for offset, _, _ in left]
    assert 3 in offsets and 2 not in offsets and 4 not in offsets  # round 1's "once1" kept between two gaps
    # the first gap: offsets [gap, gap_end) are gone (the log start stays 0 on a compacted topic)
    gap, gap_end = next((o + 1, following) for o, following in zip([-1, *offsets], offsets, strict=False)
                        if following > o + 1)
    expected = [(TOPIC, 0, o, k, v) for o, k, v in left]

    # the whole log, with failOnDataLoss at its default (true): every record the cleaner kept, once
    assert rows_by_offset(read_batch(spark, bootstrap, subscribe=TOPIC)) == expected

    # a range wholly inside a gap: no rows, no error, no wait
    started = time.monotonic()
    inside = read_batch(spark, bootstrap, subscribe=TOPIC, startingOffsets=json.dumps({TOPIC: {"0": gap}}),
                        endingOffsets=json.dumps({TOPIC: {"0": gap_end}}))
    assert rows_by_offset(inside) == []
    assert time.monotonic() - started < 30, "a range inside a gap was not finished at once"

    # a range that begins inside a gap
    from_gap = read_batch(spark, bootstrap, subscribe=TOPIC, startingOffsets=json.dumps({TOPIC: {"0": gap}}))
    assert rows_by_offset(from_gap) == [row for row in expected if row[2] >= gap]

    # a stream cutting the log into ranges of 2 offsets, many of them inside gaps
    df = stream(spark, bootstrap, subscribe=TOPIC, startingOffsets="earliest", maxOffsetsPerTrigger=2)
    batches, progress = run_collecting(df, tmp_path / "cp")
    assert sorted(row for batch in batches for row in batch) == [(0, o, v) for o, _, v in left]
    assert progress is not None
