"""Replication throttles, as Kafka's ReplicationQuotaManager: a byte rate per side (leader, follower)
and the partitions each side throttles on this broker.

- The rate: `leader.replication.throttled.rate` / `follower.replication.throttled.rate` in force here
  (this broker's dynamic value, the cluster-wide one, server.properties; unlimited when none), set at once
  when any of them changes (`ReplicationQuota.bound`).
- The partitions: the topic configs `leader.replication.throttled.replicas` /
  `follower.replication.throttled.replicas`, '*' or `partition:broker` pairs; a pair throttles the
  partition here when it names this broker (Kafka's parseThrottledPartitions). Read from the topic's
  configs when asked, so a change is in force at the next fetch.
- Measuring: the bytes of throttled partitions moved (the leader records what it sends, the follower
  what it appends) over `replication.quota.window.num` windows of `replication.quota.window.size.seconds`,
  as Kafka's SimpleRate: the total of the windows kept, divided by the time since the oldest one
  began, but never by less than one window. The quota is exceeded when that rate is above the bound.

Who is held back (the callers): a replica not in sync, of a throttled partition, while the quota is
exceeded — never an in-sync one, so the ISR does not thrash (Kafka's shouldLeaderThrottle and
shouldFollowerThrottle). Traffic of in-sync replicas of throttled partitions counts all the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import lru_cache

from broker.log import TopicPartition
from broker.topic_configs import throttled_replica_pairs

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"

_ALL = frozenset({-1})  # '*': every partition of the topic


@lru_cache(maxsize=1024)
def throttled_partitions(value: str, node_id: int) -> frozenset[int]:
    """The partitions a throttled-replicas list throttles on broker `node_id` (_ALL for '*'); nothing
    for a value that is not such a list (one written to the store by another tool is not checked)."""
    value = value.strip()
    if value == "*":
        return _ALL
    pairs = throttled_replica_pairs(value.split(",")) or ()  # a value the store holds unchecked: none
    return frozenset(partition for partition, broker in pairs if broker == node_id)


class SampledRate:
    """Bytes per second over a ring of `samples` windows of `window_s` seconds (Kafka's SampledStat
    with SimpleRate's window size). Times are seconds on a monotonic clock."""

    def __init__(self, samples: int, window_s: float) -> None:
        self.samples = samples
        self.window_s = window_s
        self._starts: list[float] = []  # when each window began
        self._totals: list[float] = []
        self._current = 0

    def record(self, value: float, now: float) -> None:
        if not self._starts:
            self._starts.append(now)
            self._totals.append(0.0)
        if now - self._starts[self._current] >= self.window_s:  # the current window is over: the next
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._starts):
                self._starts.append(now)
                self._totals.append(0.0)
            else:
                self._starts[self._current], self._totals[self._current] = now, 0.0
        self._totals[self._current] += value

    def rate(self, now: float) -> float:
        expired = self.samples * self.window_s
        for i, start in enumerate(self._starts):  # windows older than the whole ring count no more
            if now - start >= expired:
                self._starts[i], self._totals[i] = now, 0.0
        oldest = min(self._starts, default=now)
        return sum(self._totals) / max(now - oldest, self.window_s)


class ReplicationQuota:
    """One side's throttle on this broker (leader or follower)."""

    def __init__(self, replicas_config: str, node_id: int, topic_configs: Callable[[str], Mapping[str, str] | None],
                 samples: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        """`topic_configs`: a topic's config overrides (None once it is gone)."""
        self.replicas_config = replicas_config
        self.node_id = node_id
        self.topic_configs = topic_configs
        self.clock = clock
        self.rate = SampledRate(samples, window_s)
        self.bound: int | None = None  # bytes/s; None: unlimited

    def is_throttled(self, tp: TopicPartition) -> bool:
        configs = self.topic_configs(tp.topic)
        value = configs.get(self.replicas_config) if configs else None
        if not value:
            return False
        partitions = throttled_partitions(value, self.node_id)
        return partitions is _ALL or tp.partition in partitions

    def exceeded(self) -> bool:
        return self.bound is not None and self.rate.rate(self.clock()) > self.bound

    def record(self, size: int) -> None:
        """Bytes of throttled partitions moved, counted whether or not the quota is exceeded."""
        if size:
            self.rate.record(size, self.clock())


class ReplicationThrottles:
    """Both sides' quotas on this broker, held by the ReplicaManager."""

    def __init__(self, node_id: int, topic_configs: Callable[[str], Mapping[str, str] | None], samples: int,
                 window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.leader = ReplicationQuota(LEADER_REPLICAS, node_id, topic_configs, samples, window_s, clock)
        self.follower = ReplicationQuota(FOLLOWER_REPLICAS, node_id, topic_configs, samples, window_s, clock)

    def set_rates(self, leader: int | None, follower: int | None) -> None:
        """The rates in force now (dynamic configs changed): the next fetch is measured against them."""
        self.leader.bound, self.follower.bound = leader, follower
