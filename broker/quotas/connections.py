"""connection_creation_rate: how many connections per second a client IP may open (KIP-612), enforced as
Kafka 4.3.1's ConnectionQuotas enforces it.

The quota of an address is its own ip entity's, else the `<default>` ip entity's; each address has its
own rate over the client quota windows. A connection that takes the rate over the quota is taken back
from the rate, served nothing, and closed once its throttle time (capped at one window) has passed, as
Kafka's acceptor delays closing it. An ip entity named by a host name is stored and described but
matches no connection here (Kafka resolves it when the quota changes).
"""

from __future__ import annotations

import ipaddress
import time

from broker.quotas.entities import CONNECTION_CREATION_RATE, IP
from broker.quotas.rate import SampledRate, record_and_throttle_ms
from broker.quotas.store import Quotas

_DEFAULT = None
IDLE_EXPIRY_MS = 3600 * 1000
MAX_IDLE_RATES = 10_000


def _address(text: str) -> str:
    """One spelling per address (an IPv4-mapped IPv6 peer is its IPv4 address); names stay as given."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return text
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


class ConnectionRateQuotas:
    def __init__(self, window_num: int, window_ms: int) -> None:
        self.window_num = window_num
        self.window_ms = window_ms
        self.enabled = False  # any ip quota: the only test a new connection pays otherwise
        self._bounds: dict[str | None, float] = {}
        self._rates: dict[str, SampledRate] = {}

    def update(self, quotas: Quotas) -> None:
        bounds: dict[str | None, float] = {}
        for entity, values in quotas.items():
            parts = dict(entity)
            if IP in parts and CONNECTION_CREATION_RATE in values:
                name = parts[IP]
                bounds[_DEFAULT if name is None else _address(name)] = values[CONNECTION_CREATION_RATE]
        self._bounds = bounds
        self.enabled = bool(bounds)
        self._rates = {ip: rate for ip, rate in self._rates.items() if ip in bounds or _DEFAULT in bounds}

    def admit(self, peer: str, now_ms: int | None = None) -> int:
        """Count a new connection from `peer`; 0, or how long to hold it before closing it unserved."""
        ip = _address(peer)
        bound = self._bounds.get(ip, self._bounds.get(_DEFAULT))
        if bound is None:
            return 0
        now = int(time.monotonic() * 1000) if now_ms is None else now_ms
        rate = self._rates.get(ip)
        if rate is None:
            if len(self._rates) >= MAX_IDLE_RATES:  # drop the addresses gone quiet (Kafka expires their sensors)
                self._rates = {k: r for k, r in self._rates.items() if now - r.last_used_ms < IDLE_EXPIRY_MS}
            rate = self._rates[ip] = SampledRate(self.window_num, self.window_ms)
        throttle_ms = record_and_throttle_ms(rate, bound, 1.0, now, cap_ms=self.window_ms)
        if throttle_ms:
            rate.record(-1.0, now)  # not accepted: not counted
        return throttle_ms
