"""Kafka Streams (kafka-streams 4.3.1) restoring a persistent store from its compacted changelog on Ebb.

A count per key (groupByKey, count into a RocksDB store) runs in one JVM over 25 waves of input and
closes; once the broker's log cleaner has cleaned the store's changelog (Streams created it with
cleanup.policy=compact, and small segments through its `topic.` prefix), the application's local
state directory is deleted and a second JVM starts the same application: it restores the store from
the cleaned changelog (fewer records than offsets) and its counts must equal the input's. It then
updates the same keys for CHURN more waves: the counts stay right, the cleaner checkpoint moves on
and the changelog partition's bytes on disk stay bounded while the offsets written grow well past
that bound (ebb.interop.RestoreChecks samples them after each wave).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.interop.test_streams import ok
from tests.support.polling import wait_for

PREFIX = "restore"
CHANGELOG = f"{PREFIX}-app-{PREFIX}-counts-changelog"
KEYS, WAVES, CHURN = 40, 25, 60  # RestoreChecks: key-k gets 1 + k % 3 records a wave
SEGMENT_BYTES = 8192
# The cleaner runs often and cleans any dirty closed segment; the changelog asks for ratio 0.01 itself.
BROKER_OVERRIDES = {"ebb.testing.small.segments.enable": "true", "log.cleaner.backoff.ms": "50",
                    "log.cleaner.min.cleanable.ratio": "0.01"}
# The changelog's live data (40 keys, ~1 KB once cleaned) fits one segment; on disk: the cleaned
# segment(s), the closed ones the cleaner has not reached yet, the active one and their indexes
# (2.8 segments at most in the runs so far; the cleaner may lag on a loaded machine).
BOUND = 6 * SEGMENT_BYTES
MIN_RECORD_BYTES = 16  # a changelog record at least: "key-N" (5+), a long (8), its length varints (3+)


def expected(waves: int) -> dict[str, int]:
    return {f"key-{k}": waves * (1 + k % 3) for k in range(KEYS)}


def checkpoint(logs: Path) -> int:
    """The changelog's first dirty offset in cleaner-offset-checkpoint, or -1 before its first round."""
    path = logs / "cleaner-offset-checkpoint"
    if not path.exists():
        return -1
    for line in path.read_text().splitlines()[2:]:
        topic, partition, offset = line.split()
        if topic == CHANGELOG and partition == "0":
            return int(offset)
    return -1


@pytest.fixture(scope="module")
def run(java, broker, tmp_path_factory):
    logs = broker.data_dir / "logs"
    state = tmp_path_factory.mktemp("streams-state")
    properties = {"ebb.streams.state.dir": str(state), "ebb.streams.segment.bytes": str(SEGMENT_BYTES),
                  "ebb.streams.changelog.dir": str(logs / f"{CHANGELOG}-0"),
                  "ebb.streams.checkpoint": str(logs / "cleaner-offset-checkpoint"),
                  "ebb.streams.churn.waves": str(CHURN)}
    first = java.interop(broker.bootstrap, PREFIX, "restore_count", properties=properties)
    cleaned = wait_for(lambda: max(checkpoint(logs), 0), timeout_s=30.0, what="a cleaning round of the changelog")
    rocksdb = sorted(p.name for p in state.rglob("rocksdb"))
    shutil.rmtree(state)
    second = java.interop(broker.bootstrap, PREFIX, "restore_again", properties=properties)
    return {"first": first, "second": second, "cleaned": cleaned, "rocksdb": rocksdb}


def test_counts_before_the_stop(run):
    line = ok(run["first"], "restore_counted")
    assert line["counts"] == expected(WAVES) and line["closed"], line
    assert run["rocksdb"], "the store should be persistent (a rocksdb directory under the state dir)"


def test_restores_the_counts_from_the_cleaned_changelog(run):
    line = ok(run["second"], "restore_restored")
    assert line["counts"] == expected(WAVES), (line, run["second"].stderr[-6000:])
    start, end = line["range"]
    # everything the first run wrote went to the changelog; the cleaner had removed the older values
    assert start == 0 and end >= sum(expected(WAVES).values()), line
    assert 0 < run["cleaned"] <= end, run["cleaned"]
    assert KEYS <= line["restored"] < end - start, f"restored {line['restored']} of offsets {start}..{end}"


def test_counts_stay_right_while_the_same_keys_are_updated(run):
    line = ok(run["second"], "restore_churn")
    assert all(sample["right"] for sample in line["samples"]), line["samples"]
    assert line["counts"] == expected(WAVES + CHURN) and line["closed"], line


def test_changelog_bytes_stay_bounded(run):
    samples = ok(run["second"], "restore_churn")["samples"]
    written = samples[-1]["end"]
    sizes = [sample["bytes"] for sample in samples]
    checkpoints = [sample["checkpoint"] for sample in samples]
    assert checkpoints[-1] > run["cleaned"] and checkpoints == sorted(checkpoints), checkpoints
    assert max(sizes) <= BOUND, list(zip(sizes, checkpoints, strict=True))
    # without the cleaner the partition would hold every offset written, twice the bound or more
    assert written * MIN_RECORD_BYTES >= 2 * BOUND, written
