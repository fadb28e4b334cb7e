"""KafkaConsumer in a group (kafka-clients 4.3.1) against Ebb.

Commits (sync and async) and resuming from them, seek, beginningOffsets after DeleteRecords, and
reading below the log start offset: auto.offset.reset=earliest moves to the new start, latest to the
end, none raises OffsetOutOfRangeException. 30 records; DeleteRecords before 15 while the group has
committed 10. One JVM runs the `consumer` suite of ebb.interop.ConsumerChecks.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def steps(java, broker):
    return java.interop(broker.bootstrap, "consumer", "consumer")


def test_commit_sync_and_async(steps):
    line = steps.ok("commit")
    assert (line["read_first"], line["read"]) == (0, 30)
    assert line["after_sync"] == 10
    assert (line["async_completed"], line["async_error"], line["after_async"]) == (True, "none", 12)


def test_a_new_member_resumes_from_the_commit_and_seeks(steps):
    line = steps.ok("resume_and_seek")
    assert (line["resumed_first"], line["resumed_count"]) == (10, 20)
    assert (line["after_seek_first"], line["after_seek_count"]) == (20, 10)
    assert line["position"] == 30


def test_beginning_offsets_after_delete_records(steps):
    assert steps.ok("delete_records") == {"step": "delete_records", "low_watermark": 15, "beginning": 15, "end": 30}


def test_seek_below_the_log_start_with_reset_earliest_reads_from_the_start(steps):
    assert steps.ok("seek_below_start_earliest") == {"step": "seek_below_start_earliest", "first": 15, "count": 15}


def test_seek_below_the_log_start_with_reset_latest_goes_to_the_end(steps):
    assert steps.ok("seek_below_start_latest") == {"step": "seek_below_start_latest", "read": 0, "position": 30}


def test_a_commit_below_the_log_start_resets_to_earliest(steps):
    line = steps.ok("committed_below_start_earliest")
    assert (line["first"], line["count"]) == (15, 15)


def test_a_commit_below_the_log_start_without_reset_raises(steps):
    error = steps.ok("committed_below_start_none")["raised"]
    assert error.startswith("OffsetOutOfRangeException: Fetch position FetchPosition{offset=10"), error
