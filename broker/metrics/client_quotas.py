"""Client quota metrics, per client as its quota groups them (Kafka's `kafka.server:type=Produce` and
`type=Fetch` with user and client-id tags): the byte rate measured now and the throttles it earned.
Only clients under a quota are measured (Kafka measures every client once any quota is set)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.quotas.manager import ClientQuotas, QuotaManager


class ClientQuotaCollector:
    def __init__(self, quotas: ClientQuotas) -> None:
        self._quotas = quotas

    def collect(self) -> Iterator[Metric]:
        for kind, manager in (("produce", self._quotas.produce), ("fetch", self._quotas.fetch)):
            yield from _families(kind, manager)


def _families(kind: str, manager: QuotaManager) -> Iterator[Metric]:
    labels = ["user", "client_id"]
    rate = GaugeMetricFamily(f"kafka_server_{kind}_byte_rate",
                             f"Bytes per second of {kind} over the quota windows, per client", labels=labels)
    throttle = CounterMetricFamily(f"ebb_client_quota_{kind}_throttle_seconds",
                                   f"Throttle time {kind} clients over their quota were given", labels=labels)
    throttled = CounterMetricFamily(f"ebb_client_quota_{kind}_throttled_requests",
                                    f"{kind} requests answered with a throttle time", labels=labels)
    for (user, client_id), bytes_per_s, sensor in manager.sensors():
        rate.add_metric([user, client_id], bytes_per_s)
        throttle.add_metric([user, client_id], sensor.throttle_ms_total / 1000)
        throttled.add_metric([user, client_id], sensor.throttled)
    yield from (rate, throttle, throttled)
