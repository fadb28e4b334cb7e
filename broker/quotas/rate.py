"""A client's rate as Kafka 4.3.1 measures it for quotas, and the throttle time a violation earns.

Kafka's `Rate` over a `SampledStat` (org.apache.kafka.common.metrics): samples of `window_ms` each,
`num + 1` of them kept in a ring; a sample whose last event is `num` windows old counts nothing. The
rate is the sum of the samples over the time they span, which is taken as at least `num - 1` full
windows (a new client is not judged on its first millisecond). A value is recorded first and the
quota checked after (Sensor.record with checkQuotas): over the bound, the throttle time is what brings
the observed rate O back to the bound T if nothing else came, X = (O - T) / T * W (QuotaUtils.throttleTime),
rounded as Java's Math.round. Byte-rate quotas leave it uncapped (ClientQuotaManager); the request
quota caps it at one window (ClientRequestQuotaManager): `cap_ms`.

Controller mutations are bounded by Kafka's `TokenBucket` instead (KIP-599): credits flow in at the
quota's rate up to a burst of `num` windows' worth, a mutation takes its partitions out, possibly below
zero, and the client is over its quota while the credits are below zero; the throttle time is how long
the refill takes to bring them back to zero.
"""

from __future__ import annotations

import math

from broker.java_math import java_round
from protocol.varint import INT32_MAX


class _Sample:
    __slots__ = ("start_ms", "last_event_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0


class SampledRate:
    """Values per second over the last `num` windows of `window_ms` (Kafka's Rate in seconds)."""

    __slots__ = ("num", "window_ms", "samples", "current", "last_used_ms")

    def __init__(self, num: int, window_ms: int) -> None:
        self.num = num
        self.window_ms = window_ms
        self.samples: list[_Sample] = []
        self.current = 0
        self.last_used_ms = 0  # when it last recorded (idle rates are dropped, as Kafka expires sensors)

    def record(self, value: float, now_ms: int) -> None:
        if not self.samples:
            self.samples.append(_Sample(now_ms))
        sample = self.samples[self.current]
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms
        self.last_used_ms = now_ms

    def _advance(self, now_ms: int) -> _Sample:
        self.current = (self.current + 1) % (self.num + 1)
        if self.current >= len(self.samples):
            sample = _Sample(now_ms)
            self.samples.append(sample)
            return sample
        sample = self.samples[self.current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.num * self.window_ms
        for sample in self.samples:
            if now_ms - sample.last_event_ms >= expire_ms:
                sample.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is taken over (Rate.windowSize)."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self.samples), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        self._purge(now_ms)
        total = sum(s.value for s in self.samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def record_and_throttle_ms(rate: SampledRate, bound: float, value: float, now_ms: int,
                           cap_ms: int | None = None) -> int:
    """Record `value` and answer the throttle time if the rate now exceeds `bound` (0 if not)."""
    rate.record(value, now_ms)
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    # A NaN quota, which Kafka takes, throttles nobody (0); a tiny one saturates (Long.MAX_VALUE), then the cap
    throttle = java_round((observed - bound) / bound * rate.window_size_ms(now_ms))
    # Byte rates are not capped (as in Kafka), but the answer's throttle_time_ms is an int32: a tiny quota
    # against a large request saturates there (Kafka's int cast wraps, often to no throttle at all).
    return min(throttle, cap_ms if cap_ms is not None else INT32_MAX)


class TokenBucket:
    """Kafka's TokenBucket in seconds: its credits now, refilled lazily on each look. A new bucket is full
    (Kafka's starts empty at time 0, which the first refill fills)."""

    __slots__ = ("tokens", "updated_ms")

    def __init__(self) -> None:
        self.tokens = math.inf  # the first refill caps it at the burst
        self.updated_ms = 0

    def refill(self, bound: float, burst: float, now_ms: int) -> float:
        """The credits at `now_ms` under a quota of `bound` per second and a cap of `burst`."""
        self.tokens = min(burst, self.tokens + bound * (now_ms - self.updated_ms) / 1000)
        self.updated_ms = now_ms
        return self.tokens

    def take(self, value: float, bound: float, burst: float, now_ms: int) -> None:
        self.tokens = min(burst, self.refill(bound, burst, now_ms) - value)

    def throttle_ms(self, bound: float, burst: float, now_ms: int) -> int:
        """0 while the credits are not below zero; else how long the refill takes to bring them there
        (ControllerMutationQuotaManager.throttleTimeMs), as an int32."""
        tokens = self.refill(bound, burst, now_ms)
        if not tokens < 0:  # NaN (a NaN quota) is never below: nobody is throttled, as in Kafka
            return 0
        return min(java_round(-tokens / bound * 1000), INT32_MAX)
