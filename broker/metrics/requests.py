"""Per-API request metrics, Kafka's RequestMetrics: how many requests, which error codes their
responses carried, and where each one's time went.

The network layer (broker/server.py) opens a RequestTiming when it starts serving a request and
closes it once the answer is handed to the socket. Phases, as Kafka splits TotalTimeMs:
  request queue  arrival of the frame -> the handler starts (waiting behind earlier requests of the
                 same connection, which are served in order);
  local          the handler's own work;
  remote         time parked in a purgatory (Produce acks=-1, a long-poll Fetch, DeleteRecords);
                 purgatories add to it through `note_parked`;
  response send  the answer handed over -> the socket's write buffer has room again.
Counts are plain ints updated in place. A request's four timestamps and its parked time are appended as
one tuple and folded into the phase histograms in batches (and before every scrape), where the phases'
arithmetic, the bucket search, the counting and the sums run in C loops: five observations inline cost
the Fetch path ~190 Python opcodes a request, the phases alone ~35.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter, _count_elements  # type: ignore[attr-defined]  # Counter.update's C helper
from collections.abc import Iterator
from contextvars import ContextVar
from functools import partial, reduce
from operator import add, attrgetter, sub
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from broker.metrics.histogram import Histogram
from protocol.errors import ErrorCode

PHASES = ("requestqueuetime", "localtime", "remotetime", "responsesendtime", "totaltime")
_FOLD_AT = 256  # pending phase-time tuples per API before they are folded into its histograms

# The timing of the request the current task is serving; the purgatory adds its parked time to it.
_current: ContextVar[RequestTiming | None] = ContextVar("ebb_request_timing", default=None)


def note_parked(seconds: float) -> None:
    """A purgatory wait of the request being served ended after `seconds` (its remote time)."""
    timing = _current.get()
    if timing is not None:
        timing.remote += seconds


class _ApiStats:
    __slots__ = ("requests", "errors", "phases", "pending")

    def __init__(self) -> None:
        self.requests = 0
        self.errors: dict[int, int] = {}  # error code -> how many times a response carried it
        self.phases = tuple(Histogram() for _ in PHASES)
        # One per request: when it arrived, started, was handled and sent, and its time parked (RequestTiming)
        self.pending: list[tuple[float, float, float, float, float]] = []

    def fold(self) -> None:
        """Observe the pending requests' phase times: the same counts and sums as one observe() each, in C
        loops. The remote time is at most the handler's whole time; the local time is the rest of it."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        arrived, started, handled, sent, parked = zip(*pending, strict=True)
        local_and_remote = tuple(map(sub, handled, started))
        remote = tuple(map(min, parked, local_and_remote))
        phases = (tuple(map(sub, started, arrived)), tuple(map(sub, local_and_remote, remote)), remote,
                  tuple(map(sub, sent, handled)), tuple(map(sub, sent, arrived)))  # in PHASES' order
        for histogram, values in zip(self.phases, phases, strict=True):
            counts = histogram.counts
            for index, count in Counter(map(partial(bisect_left, histogram.bounds), values)).items():
                counts[index] += count
            histogram.sum = reduce(add, values, histogram.sum)  # added in order, as observe() would


class RequestTiming:
    __slots__ = ("_stats", "arrived", "started", "handled_at", "remote")

    def __init__(self, stats: _ApiStats, arrived: float) -> None:
        self._stats = stats  # the request's API's: handled() and sent() both count into it
        self.arrived = arrived
        self.started = time.perf_counter()
        self.handled_at = self.started
        self.remote = 0.0

    def handled(self, response: object | None) -> None:
        """The handler returned `response` (None: no answer is due, e.g. Produce acks=0)."""
        self.handled_at = time.perf_counter()
        _current.set(None)
        stats = self._stats
        stats.requests += 1
        if response is not None:
            count_errors(response, stats.errors)

    def sent(self) -> None:
        """The answer is in the socket's hands and its write buffer has room: the request is done."""
        pending = self._stats.pending
        pending.append((self.arrived, self.started, self.handled_at, time.perf_counter(), self.remote))
        if len(pending) >= _FOLD_AT:
            self._stats.fold()


class RequestMetrics:
    def __init__(self) -> None:
        self._apis: dict[str, _ApiStats] = {}

    def stats(self, api: str) -> _ApiStats:
        stats = self._apis.get(api)
        if stats is None:
            stats = self._apis[api] = _ApiStats()
        return stats

    def begin(self, api: str, arrived: float) -> RequestTiming:
        """Start timing a request that arrived at `arrived` (time.perf_counter()) and whose handler
        runs now, in the current task."""
        timing = RequestTiming(self._apis.get(api) or self.stats(api), arrived)
        _current.set(timing)
        return timing

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests served, by API (Kafka's RequestsPerSec)", labels=["request"])
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "Error codes in responses, by API and error, NONE included "
                                     "(Kafka's ErrorsPerSec)", labels=["request", "error"])
        phases = [HistogramMetricFamily(f"kafka_network_requestmetrics_{phase}_seconds",
                                        f"Request {phase} in seconds, by API (Kafka's {phase} in ms)",
                                        labels=["request"]) for phase in PHASES]
        for api, stats in sorted(self._apis.items()):
            stats.fold()
            requests.add_metric([api], stats.requests)
            for code, count in sorted(stats.errors.items()):
                errors.add_metric([api, _error_name(code)], count)
            for family, histogram in zip(phases, stats.phases, strict=True):
                family.add_metric([api], histogram.cumulative(), histogram.sum)
        yield requests
        yield errors
        yield from phases


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# Per response class (from its spec): whether it has an ErrorCode, and its arrays of structs to walk.
_PLANS: dict[type, tuple[bool, tuple[str, ...]]] = {}
_ERROR_CODE = attrgetter("error_code")


def count_errors(struct: Any, into: dict[int, int]) -> None:  # any message or nested struct: fields found at run time
    """Add every error code a response carries (top level and nested, e.g. per partition) to `into`,
    as Kafka's AbstractResponse.errorCounts does."""
    shape = _TWO_LEVELS.get(type(struct), _UNKNOWN)
    if shape is _UNKNOWN:
        shape = _TWO_LEVELS[type(struct)] = _two_levels(type(struct))
    if shape is None:
        _count_items((struct,), into)
        return
    # Topics, then their partitions (Fetch, Produce): the generic walk's counts without its recursion
    has_error, outer, inner = shape
    if _compiled_count is not None:
        _compiled_count(struct, has_error, outer, inner, into)
        return
    if has_error:
        code = struct.error_code
        into[code] = into.get(code, 0) + 1
    for item in getattr(struct, outer) or ():  # null, as the generic walk takes it
        found = getattr(item, inner)
        if found:
            _count_elements(into, map(_ERROR_CODE, found))


try:  # the loop below in one call (setup.py builds it)
    from broker.metrics._error_counts import count_two_levels as _compiled_count
except ImportError:  # pragma: no cover - the package installed without a C compiler
    _compiled_count = None

# Per response class: (its own ErrorCode?, the one array under it, the one array of error carriers in
# that) when that is all it carries errors in; None for any other shape (the generic walk)
_TWO_LEVELS: dict[type, tuple[bool, str, str] | None] = {}
_UNKNOWN = (False, "", "")  # a class not seen yet


def _two_levels(cls: type) -> tuple[bool, str, str] | None:
    specs = getattr(cls, "_specs", ())
    nested = [spec for spec in specs if spec.is_array and spec.is_struct and _carries_errors(spec.fields)]
    if len(nested) != 1 or any(spec.attr == "error_code" for spec in nested[0].fields):
        return None
    inner = [spec for spec in nested[0].fields if spec.is_array and spec.is_struct and _carries_errors(spec.fields)]
    if len(inner) != 1 or not any(spec.attr == "error_code" for spec in inner[0].fields):
        return None
    if any(spec.is_array and spec.is_struct and _carries_errors(spec.fields) for spec in inner[0].fields):
        return None
    return any(spec.attr == "error_code" for spec in specs), nested[0].attr, inner[0].attr


def _count_items(items: Any, into: dict[int, int]) -> None:
    # an array's items share one type; its plan is found without a call once made
    has_error, nested = _PLANS.get(type(items[0])) or _plan(items[0])
    if has_error:
        _count_elements(into, map(_ERROR_CODE, items))  # Counter's own C loop: no Python per item
    for name in nested:
        for item in items:
            inner = getattr(item, name)
            if inner:  # most are empty (a Produce answer's record errors): no call for those
                _count_items(inner, into)


def _plan(struct: object) -> tuple[bool, tuple[str, ...]]:
    plan = _PLANS.get(type(struct))
    if plan is None:
        specs = getattr(type(struct), "_specs", ())
        # Arrays whose structs can hold no error code (a Fetch answer's aborted transactions) are not walked
        nested = tuple(spec.attr for spec in specs if spec.is_array and spec.is_struct and _carries_errors(spec.fields))
        plan = _PLANS[type(struct)] = any(spec.attr == "error_code" for spec in specs), nested
    return plan


def _carries_errors(fields: list) -> bool:
    """Whether structs of these fields, or the arrays of structs in them, have an ErrorCode."""
    return any(spec.attr == "error_code" or (spec.is_array and spec.is_struct and _carries_errors(spec.fields))
               for spec in fields)
