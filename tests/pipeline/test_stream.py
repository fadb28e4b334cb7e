"""Streaming reads and writes with Spark: read limits, checkpointed restarts, the Ebb sink.

Every query runs with trigger(availableNow=True): it drains what is there and stops by itself, so
the tests wait for termination (with a deadline) and never sleep.
"""

from __future__ import annotations

import json
import time

from tests.pipeline.helpers import add_partitions, consume_all, create_topic, produce, read_options

DEADLINE_S = 120


def stream(spark, bootstrap, **options):
    return spark.readStream.format("ebb").options(**read_options(bootstrap, **options)).load()


def run_collecting(df, checkpoint) -> tuple[list[list[tuple]], dict]:
    """Run one AvailableNow query into foreachBatch; return the rows of each non-empty batch and the last
    progress report."""
    batches: list[list[tuple]] = []

    def collect(batch_df, batch_id):
        rows = [(r.partition, r.offset, bytes(r.value)) for r in batch_df.collect()]
        if rows:
            batches.append(rows)

    query = (df.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    finish(query)
    return batches, query.lastProgress


def finish(query) -> None:
    try:
        assert query.awaitTermination(DEADLINE_S), f"query still running after {DEADLINE_S}s"
    finally:
        query.stop()


def test_max_offsets_per_trigger_and_restart_from_checkpoint(spark, bootstrap, tmp_path):
    create_topic(bootstrap, "st-limit", partitions=3)
    produce(bootstrap, {("st-limit", p): [f"{p}-{i}".encode() for i in range(10)] for p in range(3)})
    df = stream(spark, bootstrap, subscribe="st-limit", startingOffsets="earliest", maxOffsetsPerTrigger=7)
    batches, progress = run_collecting(df, tmp_path / "cp")
    rows = [row for batch in batches for row in batch]
    assert sorted(rows) == [(p, i, f"{p}-{i}".encode()) for p in range(3) for i in range(10)]  # each once
    assert max(len(b) for b in batches) <= 7
    assert len(batches) >= 5  # 30 records, at most 7 per trigger
    assert json.loads(progress["sources"][0]["endOffset"]) == {"st-limit": {"0": 10, "1": 10, "2": 10}}

    produce(bootstrap, {("st-limit", 1): [b"late-1", b"late-2"]})
    batches, _ = run_collecting(df, tmp_path / "cp")  # same checkpoint: only what came since
    assert [row for batch in batches for row in batch] == [(1, 10, b"late-1"), (1, 11, b"late-2")]


def test_a_partition_added_later_is_read_from_its_start(spark, bootstrap, tmp_path):
    create_topic(bootstrap, "st-grow")
    produce(bootstrap, {("st-grow", 0): [b"a", b"b"]})
    df = stream(spark, bootstrap, subscribe="st-grow", startingOffsets="earliest")
    batches, _ = run_collecting(df, tmp_path / "cp")
    assert [row for batch in batches for row in batch] == [(0, 0, b"a"), (0, 1, b"b")]
    add_partitions(bootstrap, "st-grow", 2)
    produce(bootstrap, {("st-grow", 0): [b"c"], ("st-grow", 1): [b"x", b"y"]})
    batches, progress = run_collecting(df, tmp_path / "cp")
    assert sorted(row for batch in batches for row in batch) == [(0, 2, b"c"), (1, 0, b"x"), (1, 1, b"y")]
    assert json.loads(progress["sources"][0]["endOffset"]) == {"st-grow": {"0": 3, "1": 2}}


def test_a_running_query_picks_up_records_as_they_come(spark, bootstrap, tmp_path):
    create_topic(bootstrap, "st-live")
    query = (stream(spark, bootstrap, subscribe="st-live", startingOffsets="earliest")
             .selectExpr("offset", "cast(value as string) as value")
             .writeStream.format("memory").queryName("st_live").option("checkpointLocation", str(tmp_path / "cp"))
             .start())  # the default trigger: a new micro-batch as soon as latestOffset moves
    try:
        for round_ in range(3):
            produce(bootstrap, {("st-live", 0): [f"r{round_}".encode()]})
            deadline = time.monotonic() + DEADLINE_S
            while spark.sql("select count(*) from st_live").first()[0] < round_ + 1:
                assert query.isActive, query.exception()
                assert time.monotonic() < deadline, f"record {round_} not read in {DEADLINE_S}s"
                time.sleep(0.1)
        assert sorted(tuple(r) for r in spark.sql("select * from st_live").collect()) == [
            (0, "r0"), (1, "r1"), (2, "r2")]
    finally:
        query.stop()


def test_starting_offsets_latest_is_the_stream_default(spark, bootstrap, tmp_path):
    create_topic(bootstrap, "st-latest")
    produce(bootstrap, {("st-latest", 0): [b"old"]})
    batches, _ = run_collecting(stream(spark, bootstrap, subscribe="st-latest"), tmp_path / "cp1")
    assert batches == []
    from_zero = stream(spark, bootstrap, subscribe="st-latest", startingOffsets='{"st-latest": {"0": 0}}')
    batches, _ = run_collecting(from_zero, tmp_path / "cp2")
    assert batches == [[(0, 0, b"old")]]


def test_stream_from_topic_to_topic_exactly_the_new_records_each_run(spark, bootstrap, tmp_path):
    create_topic(bootstrap, "st-in", partitions=2)
    create_topic(bootstrap, "st-out", partitions=2)
    produce(bootstrap, {("st-in", p): [(f"k{i}".encode(), f"v{p}-{i}".encode()) for i in range(5)] for p in range(2)})

    def run():
        source = stream(spark, bootstrap, subscribe="st-in", startingOffsets="earliest")
        query = (source.selectExpr("key", "upper(cast(value as string)) as value", "partition")
                 .writeStream.format("ebb").option("kafka.bootstrap.servers", bootstrap).option("topic", "st-out")
                 .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
        finish(query)

    run()
    out = consume_all(bootstrap, "st-out")
    assert sorted((r.partition, r.key, r.value) for r in out) == sorted(
        (p, f"k{i}".encode(), f"V{p}-{i}".encode()) for p in range(2) for i in range(5))
    produce(bootstrap, {("st-in", 0): [(b"k9", b"v0-9")]})
    run()
    out = consume_all(bootstrap, "st-out")
    assert len(out) == 11
    assert [(r.partition, r.offset, r.key, r.value) for r in out if r.key == b"k9"] == [(0, 5, b"k9", b"V0-9")]


def test_min_offsets_per_trigger_and_max_trigger_delay(spark, bootstrap, tmp_path):
    create_topic(bootstrap, "st-min")

    def start(checkpoint, **options):
        batches: list[int] = []
        df = stream(spark, bootstrap, subscribe="st-min", startingOffsets="earliest", **options)
        query = (df.writeStream.foreachBatch(lambda batch, _: batches.append(batch.count()))
                 .option("checkpointLocation", str(tmp_path / checkpoint)).start())
        return query, batches

    def wait_for_rows(query, batches) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not any(batches):
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, f"no batch with records in {DEADLINE_S}s"
            time.sleep(0.1)

    query, batches = start("cp1", minOffsetsPerTrigger=5, maxTriggerDelay="1h")
    try:
        produce(bootstrap, {("st-min", 0): [b"a", b"b", b"c"]})
        time.sleep(3)  # room for batches the option must hold back (the default trigger polls every 10 ms)
        assert not any(batches), batches
        produce(bootstrap, {("st-min", 0): [b"d", b"e"]})
        wait_for_rows(query, batches)
        assert [n for n in batches if n] == [5]
    finally:
        query.stop()
    # too few records for the minimum, but the delay passes: they come as they are
    query, batches = start("cp2", minOffsetsPerTrigger=100, maxTriggerDelay="2s")
    try:
        wait_for_rows(query, batches)
        assert [n for n in batches if n] == [5]
    finally:
        query.stop()
