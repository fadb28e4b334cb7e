"""The loop: a stream with kafka.group.id reports each finished batch to its group, the broker's
retention.committed.groups trims behind it, and deleteCommitted deletes what is safe to delete.

Every query runs with trigger(availableNow=True) and the checks wait for the broker with a deadline:
the trimming and the deletes happen on the broker and in a background thread after the batch.
"""

from __future__ import annotations

import asyncio

import pytest

from client import Admin, TopicPartition
from pipeline.groups import commit_offsets, committed_offsets
from tests.pipeline.helpers import consume_all, create_topic, produce, read_options
from tests.pipeline.test_stream import finish
from tests.support.polling import wait_for

SEGMENT_BYTES = 16384  # a stage-1 batch (one per partition and round, 7-12 KB) fits in one segment
DEADLINE_S = 60


def log_starts(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    async def go():
        async with Admin(bootstrap) as admin:
            return await admin.earliest_offsets([(topic, p) for p in range(partitions)])
    return {tp.partition: o for tp, o in asyncio.run(go()).items()}


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    async def go():
        async with Admin(bootstrap) as admin:
            return await admin.latest_offsets([(topic, p) for p in range(partitions)])
    return {tp.partition: o for tp, o in asyncio.run(go()).items()}


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    async def go():
        async with Admin(bootstrap) as admin:
            return await committed_offsets(admin, group, [TopicPartition(topic, p) for p in range(partitions)])
    return {tp.partition: o for tp, o in asyncio.run(go()).items()}


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    async def go():
        async with Admin(bootstrap) as admin:
            await commit_offsets(admin, group, {TopicPartition(*tp): o for tp, o in offsets.items()})
    asyncio.run(go())


def bytes_on_disk(broker, topic: str, partition: int) -> int:
    directory = broker.data_dir / "logs" / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in directory.iterdir() if f.name.endswith(".log"))


def wait_equal(get, expected, what: str) -> None:
    seen = []

    def check() -> bool:
        seen.append(get())
        return seen[-1] == expected

    try:
        wait_for(check, timeout_s=DEADLINE_S, what=what)
    except AssertionError:
        raise AssertionError(f"{what}: {seen[-1]} after {DEADLINE_S}s, expected {expected}") from None


def copy_stream(spark, bootstrap, source: str, target: str, checkpoint, **read):
    """An AvailableNow query from `source` to `target` through the ebb sink; waits for it to end."""
    df = spark.readStream.format("ebb").options(**read_options(bootstrap, subscribe=source,
                                                               startingOffsets="earliest", **read)).load()
    query = (df.selectExpr("key", "value").writeStream.format("ebb").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", target).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    finish(query)


def test_two_stage_pipeline_keeps_its_intermediate_topic_small(spark, broker, bootstrap, tmp_path):
    create_topic(bootstrap, "loop-src", partitions=2)
    create_topic(bootstrap, "loop-mid", partitions=2, configs={
        "retention.committed.groups": "loop-stage2", "segment.bytes": str(SEGMENT_BYTES),
        "file.delete.delay.ms": "0"})
    create_topic(bootstrap, "loop-out", partitions=2)
    total = 0
    for round_ in range(4):
        produce(bootstrap, {("loop-src", p): [(f"k{i}".encode(), f"r{round_} p{p} i{i} ".encode() * 4)
                                              for i in range(150)] for p in range(2)})
        total += 300
        copy_stream(spark, bootstrap, "loop-src", "loop-mid", tmp_path / "cp1")
        # several batches: the last one's end must reach the group too (there is no later batch to carry it)
        copy_stream(spark, bootstrap, "loop-mid", "loop-out", tmp_path / "cp2", maxOffsetsPerTrigger=120,
                    **{"kafka.group.id": "loop-stage2"})
        ends = log_ends(bootstrap, "loop-mid", 2)
        assert sum(ends.values()) == total
        assert group_offsets(bootstrap, "loop-stage2", "loop-mid", 2) == ends
        wait_equal(lambda: log_starts(bootstrap, "loop-mid", 2), ends, "loop-mid's log start offsets")
        # whole segments below the new start are gone: what is left is about the active segment
        wait_equal(lambda: [bytes_on_disk(broker, "loop-mid", p) <= SEGMENT_BYTES for p in range(2)],
                   [True, True], f"loop-mid's partitions at most {SEGMENT_BYTES} bytes of segments on disk")
    # the source topic, never trimmed, holds every round: the intermediate one holds about its last batch
    kept, source = ([bytes_on_disk(broker, t, p) for p in range(2)] for t in ("loop-mid", "loop-src"))
    assert sum(source) > 2 * sum(kept), (source, kept)
    out = consume_all(bootstrap, "loop-out")
    assert len(out) == total
    assert len({(r.key, r.value) for r in out}) == total


def test_delete_committed_deletes_what_every_reader_has_read(spark, bootstrap, tmp_path):
    """Four topics in one query: read only by it (deleted up to its commit), also read by a group that is
    behind (deleted up to that group's commit), read by a group without a commit on one partition (skipped),
    and one outside deleteCommitted.topics (never touched)."""
    for topic in ("dc-only", "dc-shared", "dc-outside"):
        create_topic(bootstrap, topic)
        produce(bootstrap, {(topic, 0): [f"{topic}-{i}".encode() for i in range(10)]})
    commit(bootstrap, "dc-other", {("dc-shared", 0): 3})
    create_topic(bootstrap, "dc-two", partitions=2)
    produce(bootstrap, {("dc-two", p): [b"x"] * 10 for p in range(2)})
    commit(bootstrap, "dc-partial", {("dc-two", 0): 10})  # reads dc-two but never committed partition 1
    df = spark.readStream.format("ebb").options(**read_options(
        bootstrap, subscribe="dc-only,dc-shared,dc-two,dc-outside", startingOffsets="earliest",
        **{"kafka.group.id": "dc-stream", "deleteCommitted": "true", "deleteCommitted.topics": "dc-(only|shared|two)",
           "maxOffsetsPerTrigger": 100})).load()
    query = (df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp"))
             .start())  # the default trigger: the query stays up, so the background deletes finish
    try:
        wait_equal(lambda: log_starts(bootstrap, "dc-only", 1) if query.isActive else query.exception(), {0: 10},
                   "dc-only's log start offset")
        wait_equal(lambda: log_starts(bootstrap, "dc-shared", 1), {0: 3}, "dc-shared's log start offset")
        # one round covers every topic, so by now dc-two was judged: a reader without a commit holds it all
        assert log_starts(bootstrap, "dc-two", 2) == {0: 0, 1: 0}
        # and a topic outside deleteCommitted.topics is never touched, even when only this query reads it
        assert log_starts(bootstrap, "dc-outside", 1) == {0: 0}
        assert group_offsets(bootstrap, "dc-stream", "dc-outside", 1) == {0: 10}
    finally:
        query.stop()


@pytest.mark.parametrize(("options", "message"), [
    ({"deleteCommitted": "true", "deleteCommitted.topics": "x"}, "option 'deleteCommitted' needs kafka.group.id"),
    ({"deleteCommitted": "true", "kafka.group.id": "g"}, "needs 'deleteCommitted.topics'"),
    ({"deleteCommitted.topics": "x"}, "option 'deleteCommitted.topics' needs deleteCommitted=true"),
    ({"groupIdPrefix": "p"}, "option 'groupIdPrefix' is not supported"),
    ({"maxTriggerDelay": "1m"}, "option 'maxTriggerDelay' needs minOffsetsPerTrigger"),
    ({"minOffsetsPerTrigger": "5", "maxTriggerDelay": "soon"}, "option 'maxTriggerDelay' must be a duration"),
    ({"minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}, r"'minOffsetsPerTrigger' \(9\) is above"),
])
def test_bad_loop_options(bootstrap, options, message):
    from pipeline.config import ReadConfig
    from pipeline.options import EbbSourceError

    with pytest.raises(EbbSourceError, match=message):
        ReadConfig.from_options(read_options(bootstrap, subscribe="t", **options), streaming=True)


def test_safe_targets_rules():
    from pipeline.delete_committed import safe_targets
    from pipeline.groups import GroupView

    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    own = {a0: 10, a1: 10, b0: 7}
    # nobody else reads: up to our commits
    assert safe_targets(own, [GroupView("idle", "Empty", committed={TopicPartition("c", 0): 1})]) == (own, {})
    # a group behind on a0 holds a0 back; a live subscriber of b without commits holds b back entirely
    behind = GroupView("behind", "Empty", committed={a0: 4, a1: 12})
    reader = GroupView("reader", "Stable", subscribed={"b"})
    targets, skipped = safe_targets(own, [behind, reader])
    assert targets == {a0: 4, a1: 10}
    assert skipped == {"b": "group reader reads it but has no commit on b-0"}
    # members whose subscriptions cannot be seen: nothing is provably safe
    targets, skipped = safe_targets(own, [GroupView("joining", "PreparingRebalance", members_unknown=True)])
    assert targets == {} and set(skipped) == {"a", "b"}
