"""Purgatory gauges and expirations: requests parked now, and how many gave up at their timeout."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

# Ebb's purgatory names -> Kafka's delayedOperation label values.
KAFKA_NAMES = {"produce": "Produce", "fetch": "Fetch", "delete-records": "DeleteRecords"}


class PurgatoryView(Protocol):
    name: str
    expired: int  # waits that ended at their timeout

    def __len__(self) -> int: ...  # operations parked now
    def watch_count(self) -> int: ...  # (operation, key) pairs watched now


class PurgatoryCollector:
    def __init__(self, purgatories: Sequence[PurgatoryView]) -> None:
        self._purgatories = purgatories

    def collect(self) -> Iterator[Metric]:
        parked = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_numdelayedoperations",
                                   "Requests parked now", labels=["delayedOperation"])
        watched = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                    "Watches held now (a parked request counts once per partition)",
                                    labels=["delayedOperation"])
        expired = CounterMetricFamily("ebb_purgatory_expirations", "Parked requests that reached their timeout",
                                      labels=["delayedOperation"])
        for purgatory in self._purgatories:
            label = [KAFKA_NAMES.get(purgatory.name, purgatory.name)]
            parked.add_metric(label, len(purgatory))
            watched.add_metric(label, purgatory.watch_count())
            expired.add_metric(label, purgatory.expired)
        yield from (parked, watched, expired)
