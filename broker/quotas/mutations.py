"""Controller mutation quotas (KIP-599, controller_mutation_rate): the partitions a client creates
(CreateTopics, CreatePartitions, and Metadata's auto-creation) and deletes (DeleteTopics) are charged
to its token bucket (rate.py's TokenBucket), found with KIP-55's precedence of entities as the byte
rates' (manager.py).

Each topic of a request is charged when it has passed every other check, just before it is changed;
validate_only requests are charged too, as Kafka 4.3.1's controller charges them. How a charge over the
quota is taken depends on the request's version (Kafka's `strictSinceVersion`):

- strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic is refused with
  THROTTLING_QUOTA_EXCEEDED while the bucket is below zero; one that finds it at zero or above is
  taken whole, however far below zero its partitions take it (a topic larger than the burst is not
  refused for ever), and the next one is refused;
- permissive (older versions, whose clients know no such error): every topic is taken, and the
  request is throttled once the bucket is below zero.

The answer's throttle_time_ms is what the last charge over the quota asked for, less the time since
(Kafka's AbstractControllerMutationQuota.throttleTime); the connection is muted for it once the answer
is out, as for the byte rates.

Where Kafka differs: its controller charges every mutation of the cluster, forwarded to it by the
broker that received the request, so a client has one bucket for the whole cluster; Ebb's brokers make
these changes themselves (ZooKeeper-era style), so each broker keeps its own buckets and a client
spread over n brokers may mutate n times its quota.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from broker.quotas.entities import CONTROLLER_MUTATION_RATE
from broker.quotas.manager import ClientSensor, QuotaManager, Tags, user_of
from broker.quotas.rate import SampledRate, TokenBucket
from broker.request_context import RequestContext
from protocol.enums import ApiKey
from protocol.errors import ErrorCode, FixedCodeError
from protocol.framing import Request

# The first version of each API whose quota is strict (Kafka's ControllerApis).
STRICT_SINCE = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}


class ThrottlingQuotaExceeded(FixedCodeError):
    """A strict charge refused: the topic's error."""

    error_code = ErrorCode.THROTTLING_QUOTA_EXCEEDED


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class MutationSensor(ClientSensor):
    """A client's controller mutations: their rate and throttles, and the token bucket that bounds them (the byte
    rates' sensors keep no bucket)."""

    __slots__ = ("bucket",)

    def __init__(self, rate: SampledRate) -> None:
        super().__init__(rate)
        self.bucket = TokenBucket()


class MutationCharge:
    """One request's charges (Kafka's Strict- and PermissiveControllerMutationQuota); a client under no
    quota gets one whose charges cost nothing."""

    __slots__ = ("_sensor", "_bound", "_burst", "strict", "_throttle_ms", "_at_ms")

    def __init__(self, sensor: MutationSensor | None, bound: float, burst: float, strict: bool) -> None:
        self._sensor = sensor
        self._bound = bound
        self._burst = burst
        self.strict = strict
        self._throttle_ms = 0  # what the last charge over the quota asked for
        self._at_ms = 0

    def charge(self, partitions: int, now_ms: int | None = None) -> None:
        """Take `partitions` mutations; ThrottlingQuotaExceeded (strict) refuses them, taking nothing."""
        sensor = self._sensor
        if sensor is None:
            return
        now = _now_ms() if now_ms is None else now_ms
        bucket, bound, burst = sensor.bucket, self._bound, self._burst
        if self.strict:
            throttle_ms = bucket.throttle_ms(bound, burst, now)
            if throttle_ms:
                self._throttle_ms, self._at_ms = throttle_ms, now
                raise ThrottlingQuotaExceeded("The throttling quota has been exceeded.")
            bucket.take(partitions, bound, burst, now)
        else:
            bucket.take(partitions, bound, burst, now)
            throttle_ms = bucket.throttle_ms(bound, burst, now)
            if throttle_ms:
                self._throttle_ms, self._at_ms = throttle_ms, now
        sensor.rate.record(partitions, now)

    def throttle_ms(self, now_ms: int | None = None) -> int:
        if not self._throttle_ms:
            return 0
        now = _now_ms() if now_ms is None else now_ms
        return max(0, self._throttle_ms - (now - self._at_ms))

    def finish(self, connection: RequestContext) -> int:
        """The answer's throttle time, which the connection is also muted for (and the metrics count)."""
        throttle_ms = self.throttle_ms()
        if throttle_ms and self._sensor is not None:
            self._sensor.throttle_ms_total += throttle_ms
            self._sensor.throttled += 1
            connection.throttle_ms = max(connection.throttle_ms, throttle_ms)
        return throttle_ms


class MutationQuotas(QuotaManager[MutationSensor]):
    """controller_mutation_rate: each client's bucket, under the byte rates' precedence of entities."""

    def __init__(self, window_num: int, window_ms: int) -> None:
        super().__init__(CONTROLLER_MUTATION_RATE, window_num, window_ms, MutationSensor)

    def for_request(self, request: Request[Any], connection: RequestContext) -> MutationCharge:
        """The charge of a CreateTopics, CreatePartitions or DeleteTopics request, strict or not by its
        version."""
        strict = request.api_version >= STRICT_SINCE[ApiKey(request.api_key)]
        return self.for_client(connection, request.header.client_id, strict)

    def for_client(self, connection: RequestContext, client_id: str | None, strict: bool) -> MutationCharge:
        """The charge of mutations the client asked for some other way (Metadata's auto-creation, which
        Kafka's broker forwards to its controller as a CreateTopics of the latest version: strict)."""
        if not self.enabled:
            return MutationCharge(None, 0.0, 0.0, strict)
        found = self.sensor(user_of(connection.principal), client_id or "", _now_ms())
        if found is None:
            return MutationCharge(None, 0.0, 0.0, strict)
        sensor, bound = found
        return MutationCharge(sensor, bound, self._burst(bound), strict)

    def tokens(self) -> Iterator[tuple[Tags, float]]:
        """Each measured client's credits now (Kafka's `tokens` metric of its ControllerMutation sensor)."""
        now = _now_ms()
        for tags, sensor in list(self._sensors.items()):
            bound = self._bound(tags)
            if bound is not None:  # a quota removed since: its sensor goes at the sweep
                yield tags, sensor.bucket.refill(bound, self._burst(bound), now)

    def _burst(self, bound: float) -> float:
        """What a bucket holds at most: controller.quota.window.num windows' worth (Kafka's TokenBucket)."""
        return self.window_num * self.window_ms / 1000 * bound
