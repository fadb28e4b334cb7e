"""broker/log/retention.py: which oldest segments each rule deletes, as a table."""

import pytest

from broker.log.config import LogConfig
from broker.log.retention import SegmentFacts, deletable_segments

NOW = 1_000_000
HOUR = 3_600_000

# Four segments of 100 bytes at offsets 0, 10, 20, 30 (the last one active), log end 40, written
# 4, 3, 2 and 1 hours ago.
SEGMENTS = [SegmentFacts(10 * i, 100, NOW - (4 - i) * HOUR) for i in range(4)]


def config(**overrides) -> LogConfig:
    base = {"retention.ms": "-1", "retention.bytes": "-1"}
    return LogConfig.from_properties({**base, **overrides})


CASES = {
    # name: (config, log start offset, high watermark, segments, expected)
    "nothing applies": (config(), 0, 40, SEGMENTS, 0),
    "log start offset inside the second segment": (config(), 15, 40, SEGMENTS, 1),
    "log start offset at the third segment's base": (config(), 20, 40, SEGMENTS, 2),
    "log start offset at the log end: all but the active": (config(), 40, 40, SEGMENTS, 3),
    "retention.ms: older than 2.5 hours": (config(**{"retention.ms": str(int(2.5 * HOUR))}), 0, 40, SEGMENTS, 2),
    "retention.ms: everything old, active one too": (config(**{"retention.ms": "0"}), 0, 40, SEGMENTS, 4),
    "retention.ms stops at the high watermark": (config(**{"retention.ms": "0"}), 0, 25, SEGMENTS, 2),
    "retention.bytes: 250 of 400 kept": (config(**{"retention.bytes": "250"}), 0, 40, SEGMENTS, 1),
    "retention.bytes: 0 keeps nothing": (config(**{"retention.bytes": "0"}), 0, 40, SEGMENTS, 4),
    "retention.min.timestamp (KIP-47) after the second segment":
        (config(**{"retention.min.timestamp": str(NOW - 2 * HOUR - 1)}), 0, 40, SEGMENTS, 2),
    "compact only: time and size do not apply, the log start offset does":
        (config(**{"cleanup.policy": "compact", "retention.ms": "0"}), 15, 40, SEGMENTS, 1),
    "the largest count of all rules wins":
        (config(**{"retention.ms": str(int(1.5 * HOUR)), "retention.bytes": "150"}), 0, 40, SEGMENTS, 3),
    "the largest count of all rules wins, the other way":
        (config(**{"retention.ms": str(int(3.5 * HOUR)), "retention.bytes": "150"}), 0, 40, SEGMENTS, 2),
    "an empty active segment is never deleted":
        (config(**{"retention.ms": "0"}), 0, 30, [*SEGMENTS[:3], SegmentFacts(30, 0, NOW)], 3),
}


@pytest.mark.parametrize("name", CASES)
def test_deletable_segments(name):
    cfg, log_start, high_watermark, segments, expected = CASES[name]
    end = 40 if segments[-1].size else segments[-1].base_offset
    assert deletable_segments(segments, cfg, log_start_offset=log_start, high_watermark=high_watermark,
                              log_end_offset=end, now_ms=NOW) == expected
