"""Fetch session gauges (Kafka's kafka.server:type=FetchSessionCache): sessions held, partitions they
cache, and sessions evicted to make room."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.fetch_sessions import FetchSessionCache


class FetchSessionCollector:
    def __init__(self, cache: FetchSessionCache) -> None:
        self._cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self._cache
        yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                "Fetch sessions (KIP-227) held now", value=len(cache.sessions))
        yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                                "Partitions cached across fetch sessions", value=cache.partitions)
        yield CounterMetricFamily("ebb_fetch_session_evictions", "Fetch sessions evicted to make room for new ones",
                                  value=cache.evictions)
