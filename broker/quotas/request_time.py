"""Request quotas (KIP-124, request_percentage): the time a client's requests take to serve, as a
percentage of one thread per quota window (Kafka 4.3.1's ClientRequestQuotaManager).

Kafka charges the time its request-handler thread spent on the request (and, unchecked, the network
thread's). Ebb serves every request on one event loop, where a request's wall time includes whatever
else the loop ran while the request awaited (other clients' requests, the disk in pool threads, the
metadata store). What is charged is therefore the loop time of the request's own code: each step of
its handler coroutine, from being resumed to its next suspension (`LoopTime`), checked against the
quota, and the encoding of its answer, counted after the check (as Kafka counts its network thread's
time). Not charged: work it handed to pool threads (disk reads and writes, recompression) or to
other tasks (a purgatory's completion, gathered sub-tasks), and the decoding of the request, done
before the quota of its client is known. Measuring costs a perf_counter call per step, and only while
some request_percentage quota exists.

The rate is Kafka's sampled rate over `quota.window.num` windows; a client over its bound gets the
throttle time capped at one window, in its answer's throttle_time_ms (where the answer has one) and as
a mute of its connection once the answer is out, as the byte rates. Exempt, as Kafka exempts them:
followers' Fetch requests, WriteTxnMarkers (between brokers), SaslHandshake and SaslAuthenticate
(served by Kafka's network layer, before any quota applies) and requests without an answer (Produce
acks=0).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

from broker.quotas.entities import REQUEST_PERCENTAGE
from broker.quotas.manager import ClientSensor, QuotaManager, user_of
from broker.request_context import RequestContext
from protocol.enums import ApiKey
from protocol.framing import Request

_T = TypeVar("_T")

PERCENT_PER_SECOND = 100.0  # one second of one thread is 100% of it for that second
_EXEMPT_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.WRITE_TXN_MARKERS})


def exempt(request: Request[Any]) -> bool:
    """Requests Kafka serves without charging their client's request quota."""
    api_key = request.api_key
    if api_key in _EXEMPT_APIS:
        return True
    if api_key == ApiKey.FETCH:
        body = request.body
        replica_id = body.replica_state.replica_id if request.api_version >= 15 else body.replica_id
        return replica_id >= 0
    return False


class LoopTime(Awaitable[_T]):
    """Awaits a coroutine, adding up the time each of its steps held the event loop (`seconds`): the
    time between being resumed and suspending again, none of the time it waited."""

    __slots__ = ("_coro", "_clock", "_step_started", "seconds")

    def __init__(self, coro: Coroutine[Any, Any, _T], clock: Callable[[], float] = time.perf_counter) -> None:
        self._coro = coro
        self._clock = clock
        self._step_started = 0.0
        self.seconds = 0.0

    def so_far(self) -> float:
        """The loop time until now, the step running included (for the coroutine itself to charge)."""
        return self.seconds + (self._clock() - self._step_started)

    def __await__(self) -> Generator[Any, Any, _T]:
        coro, clock = self._coro, self._clock
        value: Any = None
        error: BaseException | None = None
        while True:
            started = self._step_started = clock()
            try:
                awaited = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                self.seconds += clock() - started
                return done.value
            except BaseException:
                self.seconds += clock() - started
                raise
            self.seconds += clock() - started
            try:
                value, error = (yield awaited), None
            except BaseException as thrown:  # a cancellation, passed on to the coroutine
                value, error = None, thrown


class RequestQuotas(QuotaManager[ClientSensor]):
    """request_percentage: each client's share of the loop, throttled for at most one window."""

    def __init__(self, window_num: int, window_ms: int) -> None:
        super().__init__(REQUEST_PERCENTAGE, window_num, window_ms, ClientSensor, cap_ms=window_ms)

    def charge(self, connection: RequestContext, client_id: str | None, seconds: float) -> int:
        """Count `seconds` of loop time against the client's quota; the throttle time, which the
        connection is also muted for."""
        throttle_ms = self.record(user_of(connection.principal), client_id or "", seconds * PERCENT_PER_SECOND)
        if throttle_ms > connection.throttle_ms:
            connection.throttle_ms = throttle_ms
        return throttle_ms

    def charge_so_far(self, connection: RequestContext, client_id: str | None) -> int:
        """Charge the loop time the request took until now from inside its handler, where its answer is decided
        (a consumer's Fetch: Kafka decides its request throttle with its byte-rate one); the throttle time, 0 if
        the request is not metered. The server then charges the request no second time."""
        loop_time = connection.request_time
        if loop_time is None:
            return 0
        connection.request_time = None
        return self.charge(connection, client_id, loop_time.so_far())

    def record_unchecked(self, connection: RequestContext, client_id: str | None, seconds: float) -> None:
        """Count time spent on an answer already judged (Kafka's recordNoThrottle of network time)."""
        now = int(time.monotonic() * 1000)
        found = self.sensor(user_of(connection.principal), client_id or "", now)
        if found is not None:
            found[0].rate.record(seconds * PERCENT_PER_SECOND, now)
