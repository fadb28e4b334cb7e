"""Network gauges and the request metrics the server keeps (broker/metrics/requests.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric


class RequestMetricsView(Protocol):
    def collect(self) -> Iterator[Metric]: ...


class NetworkCollector:
    def __init__(self, connections: Sized, requests: RequestMetricsView) -> None:
        self._connections = connections
        self._requests = requests

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                                "Client and broker connections open now", value=len(self._connections))
        yield from self._requests.collect()
