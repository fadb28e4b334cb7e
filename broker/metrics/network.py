"""Network gauges and the request metrics the server keeps (broker/metrics/requests.py).

Connections are counted twice: per listener and network processor under the name Prometheus' JMX
exporter gives Kafka's `kafka.server:type=socket-server-metrics,listener=L,networkProcessor=N`
attribute `connection-count` (so dashboards and alerts written for Kafka read it; Ebb serves every
connection on one event loop, network processor "0"), and in total under the name Ebb exported first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


class RequestMetricsView(Protocol):
    def collect(self) -> Iterator[Metric]: ...


class ListenerView(Protocol):
    @property
    def name(self) -> str: ...


class ConnectionView(Protocol):
    @property
    def listener(self) -> ListenerView: ...


NETWORK_PROCESSOR = "0"  # every connection is served by the one event loop


class NetworkCollector:
    def __init__(self, listener_names: list[str], connections: Collection[ConnectionView],
                 requests: RequestMetricsView, file_bytes_sent: Callable[[], int]) -> None:
        self._listener_names = listener_names
        self._connections = connections
        self._requests = requests
        self._file_bytes_sent = file_bytes_sent

    def collect(self) -> Iterator[Metric]:
        per_listener = Counter(connection.listener.name for connection in list(self._connections))
        by_listener = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                        "Connections open now, per listener and network processor",
                                        labels=["listener", "networkProcessor"])
        for name in self._listener_names:
            by_listener.add_metric([name, NETWORK_PROCESSOR], per_listener[name])
        yield by_listener
        yield GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                                "Client and broker connections open now, all listeners",
                                value=sum(per_listener.values()))
        yield CounterMetricFamily("ebb_fetch_bytes_sent_from_files",
                                  "Record bytes Fetch answers sent from segment files with sendfile (no copy)",
                                  value=self._file_bytes_sent())
        yield from self._requests.collect()
