"""failOnDataLoss after DeleteRecords moved the log start offset: a clear error by default, or skip.

As in Spark's Kafka connector: offsets a query asked for that are no longer on the broker fail the
query unless failOnDataLoss=false, in which case the read goes on from the log start.
"""

from __future__ import annotations

import re

import pytest
from pyspark.errors import PySparkException

from tests.pipeline.helpers import create_topic, delete_records, produce, read_batch, rows_by_offset
from tests.pipeline.test_stream import finish, run_collecting, stream

LOST = "cannot read dl-batch-0 from offset 2: offsets 2 to 5 were deleted (the log starts at 6"


def test_batch_read_below_the_log_start(spark, bootstrap):
    create_topic(bootstrap, "dl-batch", partitions=2)
    produce(bootstrap, {("dl-batch", p): [f"{p}-{i}".encode() for i in range(10)] for p in range(2)})
    delete_records(bootstrap, {("dl-batch", 0): 6})
    starting = '{"dl-batch": {"0": 2, "1": 0}}'

    with pytest.raises(PySparkException, match=re.escape(LOST)) as failure:
        read_batch(spark, bootstrap, subscribe="dl-batch", startingOffsets=starting).collect()
    assert "failOnDataLoss=false" in str(failure.value)

    skipped = read_batch(spark, bootstrap, subscribe="dl-batch", startingOffsets=starting, failOnDataLoss="false")
    assert [(p, o) for _, p, o, _, _ in rows_by_offset(skipped)] == (
        [(0, o) for o in range(6, 10)] + [(1, o) for o in range(10)])
    earliest = read_batch(spark, bootstrap, subscribe="dl-batch")  # "earliest" is the log start: no loss
    assert [o for _, p, o, _, _ in rows_by_offset(earliest) if p == 0] == list(range(6, 10))


def test_stream_restart_after_its_next_records_were_deleted(spark, bootstrap, tmp_path):
    create_topic(bootstrap, "dl-stream")
    produce(bootstrap, {("dl-stream", 0): [f"a{i}".encode() for i in range(4)]})
    checkpoint = tmp_path / "cp"

    def query(**options):
        return stream(spark, bootstrap, subscribe="dl-stream", startingOffsets="earliest", **options)

    batches, _ = run_collecting(query(), checkpoint)
    assert [o for b in batches for _, o, _ in b] == [0, 1, 2, 3]

    produce(bootstrap, {("dl-stream", 0): [f"b{i}".encode() for i in range(6)]})  # offsets 4..9
    delete_records(bootstrap, {("dl-stream", 0): 7})  # 4, 5, 6 go before the query saw them
    failed = (query().writeStream.format("noop").option("checkpointLocation", str(checkpoint))
              .trigger(availableNow=True).start())
    with pytest.raises(PySparkException, match=re.escape("cannot read dl-stream-0 from offset 4: offsets 4 to 6")):
        finish(failed)

    batches, _ = run_collecting(query(failOnDataLoss="false"), checkpoint)  # replays the failed batch
    assert [(o, v) for b in batches for _, o, v in b] == [(7, b"b3"), (8, b"b4"), (9, b"b5")]
