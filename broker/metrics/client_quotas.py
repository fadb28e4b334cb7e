"""Client quota metrics, per client as its quota groups them (Kafka's `kafka.server:type=Produce`,
`type=Fetch`, `type=Request` and `type=ControllerMutation` with user and client-id tags, named
kafka_server_<type>_<attribute> as the other kafka_* series): the byte rate (the request time, the
mutation rate and the bucket's tokens) measured now and the throttles it earned.
Only clients under a quota are measured (Kafka measures every client once any quota is set)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.quotas.enforced import ClientQuotas
from broker.quotas.manager import ClientSensor, QuotaManager


class ClientQuotaCollector:
    def __init__(self, quotas: ClientQuotas) -> None:
        self._quotas = quotas

    def collect(self) -> Iterator[Metric]:
        yield from _families("produce", "kafka_server_produce_byte_rate",
                             "Bytes per second of produce over the quota windows, per client", self._quotas.produce)
        yield from _families("fetch", "kafka_server_fetch_byte_rate",
                             "Bytes per second of fetch over the quota windows, per client", self._quotas.fetch)
        yield from _families("request", "kafka_server_request_time",
                             "Percentage of the event loop the client's requests took over the quota windows, "
                             "per client", self._quotas.requests)
        mutations = self._quotas.mutations
        yield from _families("controller_mutation", "kafka_server_controllermutation_mutation_rate",
                             "Partitions created or deleted per second over the quota windows, per client",
                             mutations)
        tokens = GaugeMetricFamily("kafka_server_controllermutation_tokens",
                                   "Mutations left in the client's token bucket (below zero: throttled), per client",
                                   labels=["user", "client_id"])
        for (user, client_id), left in mutations.tokens():
            tokens.add_metric([user, client_id], left)
        yield tokens


def _families(kind: str, rate_name: str, rate_help: str, manager: QuotaManager[ClientSensor]) -> Iterator[Metric]:
    labels = ["user", "client_id"]
    rate = GaugeMetricFamily(rate_name, rate_help, labels=labels)
    throttle = CounterMetricFamily(f"ebb_client_quota_{kind}_throttle_seconds",
                                   f"Throttle time {kind} clients over their quota were given", labels=labels)
    throttled = CounterMetricFamily(f"ebb_client_quota_{kind}_throttled_requests",
                                    f"{kind} requests answered with a throttle time", labels=labels)
    for (user, client_id), per_s, sensor in manager.sensors():
        rate.add_metric([user, client_id], per_s)
        throttle.add_metric([user, client_id], sensor.throttle_ms_total / 1000)
        throttled.add_metric([user, client_id], sensor.throttled)
    yield from (rate, throttle, throttled)
