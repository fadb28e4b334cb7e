"""Java's arithmetic where Kafka's results depend on it: one owner for each rule."""

from __future__ import annotations

import math

from protocol.varint import INT64_MAX, INT64_MIN


def java_round(value: float) -> int:
    """Java's Math.round of a double: halves go up, NaN is 0, and values past a long's range (an infinity, a
    quotient by a tiny quota) saturate at Long.MIN_VALUE and Long.MAX_VALUE."""
    if math.isnan(value):
        return 0
    if value >= INT64_MAX:
        return INT64_MAX
    if value <= INT64_MIN:
        return INT64_MIN
    return math.floor(value + 0.5)
