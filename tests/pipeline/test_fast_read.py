"""The executors' fast reader (pipeline/fast_read.py with the compiled decoder) against a real broker,
without Spark: it reads a whole range itself — every codec, keys and values null or not, headers,
several fetch rounds — and gives the careful reader's rows. Its hand-over to the careful reader would
hide a broken fast path behind correct rows; here the hand-over fails the test instead."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from pipeline import fast_read
from pipeline.config import ReadConfig
from pipeline.planning import OffsetRange
from pipeline.transfer import read_range
from tests.pipeline.helpers import create_topic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _produce(bootstrap: str, topic: str, codec: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
    for i in range(count):
        key = None if i % 7 == 0 else b"k%d" % i
        value = None if i % 11 == 0 else b"v%d-" % i + b"x" * (i % 300)
        headers = [("h", b"%d" % i), ("empty", None)] if i % 3 == 0 else None
        producer.produce(topic, value, key, partition=0, headers=headers, timestamp=1_700_000_000_000 + i)
    assert producer.flush(30) == 0


def _config(bootstrap: str, topic: str, headers: bool) -> ReadConfig:
    return ReadConfig.from_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                    "includeHeaders": str(headers).lower()}, streaming=False)


@pytest.mark.parametrize("codec", CODECS)
def test_the_fast_reader_reads_the_whole_range_itself(bootstrap, monkeypatch, codec):
    topic, count = f"fast-{codec}", 30_000  # several 8 MiB-bounded rounds for the uncompressed topic
    create_topic(bootstrap, topic)
    _produce(bootstrap, topic, codec, count)
    for headers in (False, True):
        config = _config(bootstrap, topic, headers)
        wanted = OffsetRange(topic, 0, 5, count - 5)  # cut inside the first and the last batch
        careful = pa.Table.from_batches(list(fast_read.rows_to_batches(read_range(config, wanted),
                                                                      fast_read.arrow_schema(headers))))

        def no_hand_over(*_args):
            raise AssertionError("the fast reader handed the range over")

        monkeypatch.setattr(fast_read, "read_range", no_hand_over)
        fast = pa.Table.from_batches(list(fast_read.read_batches(config, wanted)))
        monkeypatch.undo()
        assert fast.num_rows == count - 10
        assert fast.to_pylist() == careful.to_pylist()
