"""Enforcing client quotas: which quota applies to a client, its rate, and how long to throttle it
(Kafka 4.3.1's ClientQuotaManager with its default quota callback, KIP-55's precedence).

A client is its user (the principal's name, `ANONYMOUS` without authentication) and its client id. The
quota that applies is the first configured of: user+client, user+<default> client, user, <default>
user+client, <default> user+<default> client, <default> user, client, <default> client. Clients whose
quota comes from the same entity share one rate when the entity names a type only by its default or
leaves it out (every client id of `/config/users/alice` shares alice's rate), as Kafka's metric tags make
them share one sensor.

Enforced here: producer_byte_rate (Produce: the request's size) and consumer_byte_rate (a consumer's
Fetch: the record bytes answered); connection_creation_rate in connections.py, controller_mutation_rate
in mutations.py and request_percentage in request_time.py (both on this class's precedence). A client
with no quota costs one attribute read (`enabled`) when no quota of the kind exists anywhere, and its
rate is not kept otherwise either.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import structlog

from broker.log.file_region import release_unsent
from broker.quotas.entities import CLIENT_ID, USER
from broker.quotas.rate import SampledRate, record_and_throttle_ms
from broker.quotas.store import Quotas
from broker.request_context import RequestContext
from protocol.messages import FetchRequest
from protocol.varint import INT32_MAX

log = structlog.get_logger("quotas")

INACTIVE_RATE_EXPIRY_MS = 3600 * 1000  # Kafka's InactiveSensorExpirationTimeSeconds
SWEEP_EVERY_MS = 60 * 1000

# An override's key: (user part, client part); each a name, DEFAULT, or None where the entity has no such type.
DEFAULT = "\x00<default>"  # not a name any principal or client id can carry (no NUL in either)
Tags = tuple[str, str]  # Kafka's metric tags (user, client-id), "" for a part the rate is not split by


class ClientSensor:
    """One rate and what its throttles added up to (Kafka's quota and throttle-time sensors)."""

    __slots__ = ("rate", "throttle_ms_total", "throttled")

    def __init__(self, rate: SampledRate) -> None:
        self.rate = rate
        self.throttle_ms_total = 0
        self.throttled = 0  # requests answered with a throttle time


# The sensor a manager keeps per client: ClientSensor, or one that holds more (mutations.py's MutationSensor).
# Covariant: a manager is only read through its sensors, never handed one.
SensorT = TypeVar("SensorT", bound=ClientSensor, covariant=True)


def _part(entity: dict[str, str | None], kind: str) -> str | None:
    if kind not in entity:
        return None
    name = entity[kind]
    return DEFAULT if name is None else name


class QuotaManager(Generic[SensorT]):
    """One quota key (producer_byte_rate, consumer_byte_rate, ...): every client's rate and throttle, each
    client's measures in a sensor `new_sensor` makes from its rate."""

    def __init__(self, key: str, window_num: int, window_ms: int, new_sensor: Callable[[SampledRate], SensorT],
                 cap_ms: int | None = None) -> None:
        self.key = key
        self.window_num = window_num
        self.window_ms = window_ms
        self.cap_ms = cap_ms
        self._new_sensor = new_sensor
        self.enabled = False  # any quota of this key anywhere: the hot path's only test
        self._overrides: dict[tuple[str | None, str | None], float] = {}
        self._tags: dict[tuple[str, str], Tags] = {}  # (user, client id) -> the rate it counts in
        self._bounds: dict[Tags, float | None] = {}
        self._sensors: dict[Tags, SensorT] = {}
        self._swept_ms = 0

    def update(self, quotas: Quotas) -> None:
        """Take the cluster's quotas (ClientQuotaStore's listener); rates already measured are kept."""
        overrides = {}
        for entity, values in quotas.items():
            if self.key in values:
                pairs = dict(entity)
                overrides[(_part(pairs, USER), _part(pairs, CLIENT_ID))] = values[self.key]
        self._overrides = overrides
        self.enabled = bool(overrides)
        self._tags.clear()
        self._bounds.clear()

    def quota(self, user: str, client_id: str) -> float | None:
        """The bound in force for the client (None: unlimited)."""
        return self._bound(self._tags_of(user, client_id))

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """What one request may count without being throttled for sure: the quota over num - 1 windows
        (Kafka's getMaxValueInQuotaWindow, which caps a consumer's fetch); None when unlimited."""
        bound = self.quota(user, client_id)
        return None if bound is None else bound * (self.window_num - 1) * self.window_ms / 1000

    def record(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> int:
        """Count `value` against the client's quota; the throttle time in ms (0 within it)."""
        now = int(time.monotonic() * 1000) if now_ms is None else now_ms
        found = self.sensor(user, client_id, now)
        if found is None:
            return 0
        sensor, bound = found
        throttle_ms = record_and_throttle_ms(sensor.rate, bound, value, now, self.cap_ms)
        if throttle_ms:
            sensor.throttle_ms_total += throttle_ms
            sensor.throttled += 1
        return throttle_ms

    def sensor(self, user: str, client_id: str, now_ms: int) -> tuple[SensorT, float] | None:
        """The client's sensor (made on first use) and the bound in force for it; None when unlimited."""
        if now_ms - self._swept_ms >= SWEEP_EVERY_MS:
            self._sweep(now_ms)
        tags = self._tags.get((user, client_id))
        if tags is None:
            tags = self._tags_of(user, client_id)
        bound = self._bounds[tags] if tags in self._bounds else self._bound(tags)
        if bound is None:
            return None
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = self._new_sensor(SampledRate(self.window_num, self.window_ms))
        return sensor, bound

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back what `record` counted (Kafka's unrecordQuotaSensor: a negative value, unchecked)."""
        sensor = self._sensors.get(self._tags.get((user, client_id)) or self._tags_of(user, client_id))
        if sensor is not None:
            sensor.rate.record(-value, now_ms)

    def _sweep(self, now: int) -> None:
        self._swept_ms = now
        for tags in [t for t, s in self._sensors.items() if now - s.rate.last_used_ms >= INACTIVE_RATE_EXPIRY_MS]:
            del self._sensors[tags]
        self._tags.clear()  # rebuilt on use: client ids come and go
        self._bounds.clear()

    @property
    def cached_bounds(self) -> int:
        """How many clients' bounds are held between sweeps (client ids come and go: the sweep forgets)."""
        return len(self._bounds)

    def sensors(self) -> Iterator[tuple[Tags, float, SensorT]]:
        """Each measured client's (user, client-id) tags, its rate now and its sensor (the metrics)."""
        now = int(time.monotonic() * 1000)
        for tags, sensor in list(self._sensors.items()):
            yield tags, sensor.rate.measure(now), sensor

    def _tags_of(self, user: str, client_id: str) -> Tags:
        """DefaultQuotaCallback.quotaMetricTags: the first entity of the precedence that is configured
        decides which parts split the rate."""
        has = self._overrides.__contains__
        if (has((user, client_id)) or has((user, DEFAULT))):
            tags = (user, client_id)
        elif has((user, None)):
            tags = (user, "")
        elif has((DEFAULT, client_id)) or has((DEFAULT, DEFAULT)):
            tags = (user, client_id)
        elif has((DEFAULT, None)):
            tags = (user, "")
        else:
            tags = ("", client_id)
        self._tags[(user, client_id)] = tags
        return tags

    def _bound(self, tags: Tags) -> float | None:
        """DefaultQuotaCallback.quotaLimit."""
        user, client_id = tags
        get = self._overrides.get
        if user and client_id:
            found = get((user, client_id))
            for key in ((user, DEFAULT), (DEFAULT, client_id), (DEFAULT, DEFAULT)):
                if found is None:
                    found = get(key)
        elif user:
            found = get((user, None))
            if found is None:
                found = get((DEFAULT, None))
        elif client_id:
            found = get((None, client_id))
            if found is None:
                found = get((None, DEFAULT))
        else:
            found = None
        self._bounds[tags] = found
        return found


def user_of(principal: str) -> str:
    """The principal's name, as Kafka's quotas key a user (`User:alice` -> `alice`)."""
    return principal.partition(":")[2] or principal


def throttle_for(manager: QuotaManager[ClientSensor], connection: RequestContext, client_id: str | None,
                 value: float) -> int:
    """Count `value` against the connection's client; the throttle time, which the server also mutes the
    connection for once the answer is out."""
    throttle_ms = manager.record(user_of(connection.principal), client_id or "", value)
    if throttle_ms:
        connection.throttle_ms = throttle_ms
    return throttle_ms


def fetch_throttle(manager: QuotaManager[ClientSensor], connection: RequestContext, client_id: str | None, value: float,
                   request_throttle_ms: int = 0) -> int:
    """A consumer's Fetch of `value` bytes: the throttle time, the larger of its byte rate's and
    `request_throttle_ms` (its request_percentage's, charged already), as Kafka's handleFetchRequest (the
    connection muted for it, as throttle_for). A Fetch throttled by either is answered with no data, so its
    bytes are taken back and its files released, as Kafka does."""
    user, now = user_of(connection.principal), int(time.monotonic() * 1000)
    recorded = manager.enabled
    throttle_ms = max(manager.record(user, client_id or "", value, now) if recorded else 0, request_throttle_ms)
    if throttle_ms:
        if recorded:
            manager.unrecord(user, client_id or "", value, now)
        connection.throttle_ms = max(connection.throttle_ms, throttle_ms)
        regions = connection.file_regions
        if regions:  # the answer carries none of the record data read for it
            for exc in release_unsent(regions):
                log.warning("releasing a throttled fetch's files failed", error=repr(exc))
    return throttle_ms


def cap_fetch(manager: QuotaManager[ClientSensor], connection: RequestContext, client_id: str | None,
              body: FetchRequest) -> None:
    """A consumer's Fetch reads no more than its quota's window holds (Kafka's fetchMaxBytes), and waits
    for no more than that (fetchMinBytes)."""
    most = manager.max_value_in_window(user_of(connection.principal), client_id or "")
    if most is not None:  # a NaN quota caps at 0, as Kafka's toInt (one batch is still served)
        body.max_bytes = min(body.max_bytes, 0 if math.isnan(most) else int(min(most, INT32_MAX)))
        body.min_bytes = min(body.min_bytes, body.max_bytes)
