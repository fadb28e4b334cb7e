"""The quotas enforced here, one manager each, fed by the store (ClientQuotaStore's listener)."""

from __future__ import annotations

from broker.quotas.connections import ConnectionRateQuotas
from broker.quotas.entities import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from broker.quotas.manager import ClientSensor, QuotaManager
from broker.quotas.mutations import MutationQuotas
from broker.quotas.request_time import RequestQuotas
from broker.quotas.store import Quotas


class ClientQuotas:
    """The byte rates, request time and connection rates over `quota.window.*`, controller mutations over
    `controller.quota.window.*`."""

    def __init__(self, window_num: int, window_size_seconds: int,
                 mutation_window_num: int = 11, mutation_window_size_seconds: int = 1) -> None:
        window_ms = window_size_seconds * 1000
        self.produce = QuotaManager(PRODUCER_BYTE_RATE, window_num, window_ms, ClientSensor)
        self.fetch = QuotaManager(CONSUMER_BYTE_RATE, window_num, window_ms, ClientSensor)
        self.connections = ConnectionRateQuotas(window_num, window_ms)
        self.requests = RequestQuotas(window_num, window_ms)
        self.mutations = MutationQuotas(mutation_window_num, mutation_window_size_seconds * 1000)

    def update(self, quotas: Quotas) -> None:
        self.produce.update(quotas)
        self.fetch.update(quotas)
        self.connections.update(quotas)
        self.requests.update(quotas)
        self.mutations.update(quotas)
