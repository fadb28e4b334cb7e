"""Network gauges and the request metrics the server keeps (broker/metrics/requests.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sized
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


class RequestMetricsView(Protocol):
    def collect(self) -> Iterator[Metric]: ...


class NetworkCollector:
    def __init__(self, connections: Sized, requests: RequestMetricsView, file_bytes_sent: Callable[[], int]) -> None:
        self._connections = connections
        self._requests = requests
        self._file_bytes_sent = file_bytes_sent

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                                "Client and broker connections open now", value=len(self._connections))
        yield CounterMetricFamily("ebb_fetch_bytes_sent_from_files",
                                  "Record bytes Fetch answers sent from segment files with sendfile (no copy)",
                                  value=self._file_bytes_sent())
        yield from self._requests.collect()
