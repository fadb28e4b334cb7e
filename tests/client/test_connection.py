"""BrokerConnection over real sockets against the fixture broker: negotiation, pipelining, failures."""

import asyncio

import pytest

from client.connection import BrokerConnection
from client.errors import BrokerUnreachableError, ConnectionClosedError, RequestTimeoutError
from protocol.errors import ErrorCode
from protocol.messages import MetadataRequest, MetadataResponse
from tests.client.fixture_broker import CLOSE, FixtureCluster, metadata
from tests.support.broker_process import free_port


def _connect(fixture: FixtureCluster, **options) -> BrokerConnection:
    broker = next(iter(fixture.brokers.values()))
    return BrokerConnection("127.0.0.1", broker.port, **options)


def _metadata(*names):
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names])


async def test_negotiates_with_api_versions_v3_and_picks_the_common_maximum():
    async with FixtureCluster({1: {21: (0, 2), 3: (1, 7)}}) as fixture:
        async with _connect(fixture) as conn:
            assert [s.api_version for s in fixture.seen(18)] == [3]
            assert fixture.seen(18)[0].body.client_software_name == "ebb-python"
            assert conn.api_versions_version == 3
            assert conn.api_versions[21] == (0, 2)
            assert conn.pick_version(21) == 2
            assert conn.pick_version(3) == 7
            response = await conn.request(_metadata("t"))
            assert fixture.seen(3)[0].api_version == 7
            assert [t.name for t in response.topics] == ["t"]


async def test_falls_back_to_the_api_versions_version_the_broker_names():
    async with FixtureCluster(api_versions_max=2) as fixture:
        async with _connect(fixture) as conn:
            # v3 was refused in the v0 layout naming ApiVersions 0-2; the retry used v2.
            assert [s.api_version for s in fixture.seen(18)] == [3, 2]
            assert conn.api_versions_version == 2
            assert conn.api_versions[21] == (0, 2)


async def test_falls_back_to_v0_when_the_refusal_names_no_range():
    async with FixtureCluster(api_versions_max=0) as fixture:
        fixture.hide_api_versions_range = True
        async with _connect(fixture) as conn:
            assert [s.api_version for s in fixture.seen(18)] == [3, 0]
            assert conn.api_versions_version == 0
            assert 3 in conn.api_versions


async def test_pipelined_responses_are_matched_by_correlation_id():
    async with FixtureCluster(topics={"first": {0: 1}, "second": {0: 1}}) as fixture:
        second_answered = asyncio.Event()

        async def out_of_order(broker, request):
            if request.body.topics[0].name == "first":
                await second_answered.wait()  # answer the first request last
            else:
                asyncio.get_running_loop().call_soon(second_answered.set)
            return await metadata(broker, request)

        async with _connect(fixture) as conn:
            fixture.handlers[3] = out_of_order
            first, second = await asyncio.gather(conn.request(_metadata("first")), conn.request(_metadata("second")))
            assert [t.name for t in first.topics] == ["first"]
            assert [t.name for t in second.topics] == ["second"]
            assert conn.in_flight == 0


async def test_request_timeout_then_the_connection_still_works():
    async with FixtureCluster() as fixture:
        calls = []

        async def silent_once(broker, request):
            calls.append(request)
            if len(calls) == 1:
                await asyncio.sleep(0.5)  # answers, but too late; the client must drop it
            return MetadataResponse(cluster_id=f"answer{len(calls)}")

        async with _connect(fixture) as conn:
            fixture.handlers[3] = silent_once
            with pytest.raises(RequestTimeoutError, match="Metadata v12 .* no response within 0.1s") as info:
                await conn.request(_metadata("t"), timeout_s=0.1)
            assert info.value.error_code == ErrorCode.REQUEST_TIMED_OUT
            response = await conn.request(_metadata("t"))
            assert response.cluster_id == "answer2"
            await asyncio.sleep(0.6)  # the late answer to the first arrives and is dropped
            assert conn.connected and conn.in_flight == 0


async def test_broker_closing_fails_in_flight_requests():
    async with FixtureCluster() as fixture:
        async def hang_up(broker, request):
            return CLOSE

        async with _connect(fixture) as conn:
            fixture.handlers[3] = hang_up
            with pytest.raises(ConnectionClosedError, match="closed by the broker") as info:
                await conn.request(_metadata("t"))
            assert info.value.request_sent
            assert isinstance(info.value, ConnectionError)
            assert not conn.connected
            with pytest.raises(ConnectionClosedError) as again:
                await conn.request(_metadata("t"))
            assert not again.value.request_sent


async def test_unreachable_broker():
    port = free_port()
    with pytest.raises(BrokerUnreachableError, match=f"cannot connect to 127.0.0.1:{port}") as info:
        await BrokerConnection("127.0.0.1", port).connect()
    assert info.value.error_code == ErrorCode.NETWORK_EXCEPTION and not info.value.request_sent


async def test_close_fails_pending_requests():
    async with FixtureCluster() as fixture:
        async def never(broker, request):
            return None

        conn = await _connect(fixture).connect()
        fixture.handlers[3] = never
        pending = asyncio.create_task(conn.request(_metadata("t")))
        await asyncio.sleep(0.05)
        await conn.close()
        with pytest.raises(ConnectionClosedError, match="closed by the client"):
            await pending


async def test_answers_larger_than_a_read_and_than_a_buffer_step_arrive_whole():
    # 20 MiB: read straight into the frame's own buffer, which grows once past its 16 MiB step
    big = "x" * (20 * 2**20) + "end"
    async with FixtureCluster() as fixture:
        async def large_then_small(broker, request):
            name = request.body.topics[0].name
            return MetadataResponse(cluster_id=big if name == "big" else name)

        async with _connect(fixture) as conn:
            fixture.handlers[3] = large_then_small
            first, second = await asyncio.gather(conn.request(_metadata("big")), conn.request(_metadata("small")))
            assert first.cluster_id == big and second.cluster_id == "small"
            assert (await conn.request(_metadata("again"))).cluster_id == "again"  # the framing goes on after it


async def test_an_answer_over_max_frame_closes_the_connection():
    async with FixtureCluster() as fixture:
        async def too_large(broker, request):
            return MetadataResponse(cluster_id="x" * 2**20)

        async with _connect(fixture, max_frame=2**19) as conn:
            fixture.handlers[3] = too_large
            with pytest.raises(ConnectionClosedError, match="sent a bad frame") as info:
                await conn.request(_metadata("t"))
            assert info.value.request_sent and not conn.connected


def test_on_uvloop_as_the_broker_runs_it():
    # uvloop calls connection_made after create_connection returns, and its transports are not
    # asyncio.Transport: a broker's fetchers and peers use this client on it
    import uvloop

    async def large_then_small():
        await test_answers_larger_than_a_read_and_than_a_buffer_step_arrive_whole()

    uvloop.run(large_then_small())
