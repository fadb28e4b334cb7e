"""The pure parts of planning: the read limit's shares, range splitting and the canonical offset JSON."""

from __future__ import annotations

import json

from client import TopicPartition
from pipeline.options import from_json_offsets, to_json_offsets
from pipeline.planning import OffsetRange, rate_limit, split_ranges, stream_ranges

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_rate_limit_shares_in_proportion_and_never_starves_a_small_backlog():
    begin = {A0: 0, A1: 100, B0: 5}
    end = {A0: 900, A1: 199, B0: 6}  # backlogs 900, 99, 1
    assert rate_limit(begin, end, 100) == {A0: 90, A1: 109, B0: 6}  # shares 90, 9.9 -> 9, 0.1 -> 1
    assert rate_limit(begin, end, 10_000) == end


def test_split_ranges_by_size():
    ranges = [OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 10, 20)]
    split = split_ranges(ranges, 10)
    assert [(r.partition, r.start, r.end) for r in split] == [
        (0, 0, 10), (0, 10, 20), (0, 20, 30), (0, 30, 40), (0, 40, 50), (0, 50, 60), (0, 60, 70), (0, 70, 80),
        (0, 80, 90), (1, 10, 20)]
    assert split_ranges(ranges, 2) == ranges


def test_offsets_json_is_canonical_and_new_partitions_read_from_the_log_start():
    offsets = {TopicPartition("b", 0): 1, TopicPartition("a", 10): 2, TopicPartition("a", 2): 3}
    text = json.dumps(to_json_offsets(offsets))
    assert text == '{"a": {"2": 3, "10": 2}, "b": {"0": 1}}'
    assert from_json_offsets(json.loads(text)) == offsets
    ranges = stream_ranges({A0: 5, A1: 7}, {A0: 9, A1: 7, B0: 4}, None)
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [("a", 0, 5, 9), ("b", 0, -2, 4)]
