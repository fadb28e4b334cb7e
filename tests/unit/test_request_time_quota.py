"""request_percentage (KIP-124): what a request is charged (the loop time of its own steps, none of the
time it waits), the percentage arithmetic of Kafka 4.3.1's ClientRequestQuotaManager (a share of one
thread over quota.window.num windows, the throttle capped at one window) and the requests exempt."""

from __future__ import annotations

import asyncio

import pytest

from broker.quotas.request_time import LoopTime, RequestQuotas, exempt
from broker.request_context import RequestContext
from protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    MetadataRequest,
    WriteTxnMarkersRequest,
)
from tests.unit.fakes import FakeWire, connection_of, frame_served_by, request_of


class _Clock:
    """perf_counter for LoopTime: time passes only where a test says work is done (no wall clock to flake)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def busy(self, seconds: float) -> None:
        self.now += seconds


def test_the_time_a_request_waits_is_not_charged_and_its_own_steps_are():
    clock = _Clock()
    turn = asyncio.Event()
    so_far = []

    async def handler() -> str:
        clock.busy(0.03)
        await turn.wait()  # the loop runs others meanwhile (here: the busy task below)
        clock.busy(0.02)
        so_far.append(metered.so_far())  # the running step included: what a consumer's Fetch charges itself
        clock.busy(0.01)
        return "answer"

    async def other() -> None:
        clock.busy(0.1)  # another request's work while the handler waits
        turn.set()

    metered = LoopTime(handler(), clock)

    async def main() -> str:
        answer, _ = await asyncio.gather(metered, other())
        return answer

    assert asyncio.run(main()) == "answer"
    assert so_far == [pytest.approx(0.05)]
    assert metered.seconds == pytest.approx(0.06)  # its own steps, none of the other's 0.1
    assert clock.now == pytest.approx(0.16)


def test_a_cancelled_request_is_cancelled_inside_and_its_steps_counted():
    clock = _Clock()
    reached = []

    async def handler() -> None:
        clock.busy(0.01)
        try:
            await asyncio.Event().wait()  # forever
        except asyncio.CancelledError:
            clock.busy(0.005)
            reached.append("cancelled inside")
            raise

    async def main() -> float:
        metered = LoopTime(handler(), clock)
        task = asyncio.ensure_future(metered)
        await asyncio.sleep(0)  # the handler's first step runs
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return metered.seconds

    assert asyncio.run(main()) == pytest.approx(0.015)
    assert reached == ["cancelled inside"]


def test_an_error_of_the_handler_reaches_the_server():
    async def handler() -> None:
        await asyncio.sleep(0)
        raise ValueError("bug")

    async def main() -> None:
        await LoopTime(handler())

    with pytest.raises(ValueError, match="bug"):
        asyncio.run(main())


def _manager(percent: float) -> RequestQuotas:
    manager = RequestQuotas(11, 1000)
    manager.update({(("client-id", "c"),): {"request_percentage": percent}})
    return manager


def test_loop_time_is_a_percentage_of_one_thread_and_the_throttle_is_capped_at_one_window():
    manager = _manager(10.0)  # 10% of a thread: 1 s of loop time over the 10 s a new client is judged on
    connection = RequestContext()
    assert manager.charge(connection, "c", 0.5) == 0  # 50 percent-seconds / 10 s = 5%
    assert manager.charge(connection, "c", 0.5) == 0  # 10%: at the bound
    # 12% over 10 s: (12 - 10) / 10 * 10 s = 2 s, capped at the 1 s window (QuotaUtils.boundedThrottleTime)
    assert manager.charge(connection, "c", 0.2) == 1000
    assert connection.throttle_ms == 1000
    assert manager.charge(RequestContext(), "other", 100.0) == 0  # no quota for this client


def test_a_tiny_quota_saturates_and_is_capped_at_one_window():
    # (O - T) / T * W overflows a double: Java's Math.round gives Long.MAX_VALUE, then the window's cap
    manager = _manager(1e-310)
    connection = RequestContext()
    assert manager.charge(connection, "c", 0.001) == 1000
    assert connection.throttle_ms == 1000


def test_the_encoding_is_counted_unchecked():
    manager = _manager(10.0)
    connection = RequestContext()
    manager.record_unchecked(connection, "c", 1.1)  # over the bound, but recorded without a check
    assert connection.throttle_ms == 0
    assert manager.charge(connection, "c", 0.0) > 0  # the next request finds the rate over


def test_exempt_as_kafka():
    fetch = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[])
    follower = FetchRequest(replica_id=2, max_wait_ms=0, min_bytes=0, topics=[])
    assert not exempt(request_of(fetch, 12))
    assert exempt(request_of(follower, 12))
    follower_v15 = FetchRequest(max_wait_ms=0, min_bytes=0, topics=[],
                                replica_state=FetchRequest.ReplicaState(replica_id=2, replica_epoch=1))
    assert exempt(request_of(follower_v15, 15))
    assert exempt(request_of(WriteTxnMarkersRequest(markers=[]), 1))
    assert not exempt(request_of(ApiVersionsRequest(), 3))  # Kafka charges ApiVersions
    assert not exempt(request_of(MetadataRequest(topics=[]), 12))


@pytest.mark.parametrize("ending", ["error", "cancelled"])
async def test_a_requests_loop_time_is_never_seen_by_the_next_one_however_it_ended(monkeypatch, ending):
    """A metered request that fails or is cancelled leaves no LoopTime behind: the connection's next request,
    not metered (the quota removed meanwhile), finds none to charge itself with."""
    requests = _manager(50.0)
    wire = FakeWire()
    connection = connection_of(requests, wire)
    seen: list = []
    started = asyncio.Event()

    async def handler(broker, request, context):
        seen.append(context.request_time)
        if len(seen) == 1:
            started.set()
            if ending == "error":
                raise RuntimeError("bug")
            await asyncio.Event().wait()  # until cancelled
        return ApiVersionsResponse()

    frame = frame_served_by(monkeypatch, handler)
    serving = asyncio.ensure_future(connection._serve(frame, 0.0))
    await started.wait()
    if ending == "cancelled":
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
    else:
        assert await serving is False and wire.aborted  # a handler's error closes the connection
    assert isinstance(seen[0], LoopTime)
    requests.update({})
    assert await connection._serve(frame, 0.0) is True
    assert seen[1] is None and connection.context.request_time is None


@pytest.mark.parametrize("itself", [False, True])
async def test_a_request_is_charged_once_by_the_server_or_by_its_handler(monkeypatch, itself):
    requests = _manager(50.0)
    connection = connection_of(requests)
    charged: list[float] = []
    charge = requests.charge

    def counted(context: RequestContext, client_id: str | None, seconds: float) -> int:
        charged.append(seconds)
        return charge(context, client_id, seconds)

    monkeypatch.setattr(requests, "charge", counted)

    async def handler(broker, request, context):
        if itself:  # as a consumer's Fetch does
            requests.charge_so_far(context, request.header.client_id)
        return ApiVersionsResponse()

    assert await connection._serve(frame_served_by(monkeypatch, handler), 0.0) is True
    assert len(charged) == 1 and connection.context.request_time is None
