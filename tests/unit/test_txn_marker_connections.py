"""The transaction traffic's connections to other brokers (broker/txn/peers.py, used by the
MarkerSender and the KIP-890 verifier), with a fake client connection: a broker that cannot be
reached delays neither markers to other brokers nor every later round."""

from __future__ import annotations

import asyncio

import client.connection
from broker.txn import peers as peers_module
from broker.txn.markers import MarkerSender
from broker.txn.peers import PeerConnections
from client.versions import pick_version
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import encode_request
from protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse

_Marker = WriteTxnMarkersResponse.WritableTxnMarkerResult
_Topic = _Marker.WritableTxnMarkerTopicResult
_Partition = _Topic.WritableTxnMarkerPartitionResult

DEAD, HEALTHY = 2, 3


class FakeConnection:
    """Connects at once, except to DEAD: that waits on `release` (a connect timeout), then fails."""

    release: asyncio.Event
    attempts: list[int]
    api_versions: dict[int, tuple[int, int]] = {ApiKey.WRITE_TXN_MARKERS: (0, 2)}  # what ApiVersions named
    sent: list[tuple[int, int]]  # (broker, WriteTxnMarkers version)
    answer: ErrorCode = ErrorCode.NONE  # each partition's

    def __init__(self, host, port, *, node_id, **kwargs) -> None:
        self.node_id = node_id
        self.connected = False

    def pick_version(self, api_key: int, *, low: int | None = None, high: int | None = None) -> int:
        return pick_version(api_key, self.api_versions, low=low, high=high)

    async def connect(self) -> FakeConnection:
        FakeConnection.attempts.append(self.node_id)
        if self.node_id == DEAD:
            await FakeConnection.release.wait()
            raise TimeoutError("connect timed out")
        self.connected = True
        return self

    async def request(self, request: WriteTxnMarkersRequest, version: int) -> WriteTxnMarkersResponse:
        FakeConnection.sent.append((self.node_id, version))
        encode_request(request, version, 1, "test")  # the version can carry it
        [marker] = request.markers
        return WriteTxnMarkersResponse(markers=[_Marker(producer_id=marker.producer_id, topics=[
            _Topic(name=t.name, partitions=[_Partition(partition_index=p, error_code=FakeConnection.answer)
                                            for p in t.partition_indexes])
            for t in marker.topics])])

    async def close(self) -> None:
        self.connected = False


class LedElsewhere:
    """This broker (1) leads no partition here: a marker written locally is a failure of the test."""

    async def write(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: list[tuple[str, int]], transaction_version: int = 0) -> list[ErrorCode]:
        raise AssertionError(f"markers for {partitions} written on broker 1, which leads none of them")


class SplitTopic:
    """Partition 0 led by DEAD, partition 1 by HEALTHY."""

    replicas = {0: [DEAD], 1: [HEALTHY]}

    def leader(self, partition: int) -> int:
        return DEAD if partition == 0 else HEALTHY


class TopicsByName:
    def __init__(self, **topics: SplitTopic) -> None:
        self.topics = topics

    def get(self, name: str) -> SplitTopic | None:
        return self.topics.get(name)


def _sender(monkeypatch, topics: TopicsByName | None = None) -> MarkerSender:
    FakeConnection.release = asyncio.Event()
    FakeConnection.attempts = []
    FakeConnection.sent = []
    monkeypatch.setattr(client.connection, "BrokerConnection", FakeConnection)
    peers = PeerConnections(1, lambda broker: ("localhost", 9000 + broker), None, 5000)
    return MarkerSender(LedElsewhere(), topics or TopicsByName(), 1, True, peers)


async def test_markers_to_a_healthy_broker_do_not_wait_for_a_connect_to_a_dead_one(monkeypatch) -> None:
    sender = _sender(monkeypatch)
    stuck = asyncio.create_task(sender._send(DEAD, 7, 0, True, 4, [("t", 0)]))
    async with asyncio.timeout(5):
        while DEAD not in FakeConnection.attempts:
            await asyncio.sleep(0.01)
    async with asyncio.timeout(2):  # the dead broker's connect is still pending
        assert await sender._send(HEALTHY, 7, 0, True, 4, [("t", 1)]) == [ErrorCode.NONE]
    assert not stuck.done()
    FakeConnection.release.set()
    assert await stuck == [ErrorCode.NETWORK_EXCEPTION]
    await sender._peers.close()


async def test_a_failed_connect_is_remembered_briefly(monkeypatch) -> None:
    """Rounds come every 100 ms: within the backoff a dead broker fails at once, untried; after it,
    it is tried again."""
    sender = _sender(monkeypatch)
    FakeConnection.release.set()  # the dead broker's connects fail at once
    assert await sender._send(DEAD, 7, 0, True, 4, [("t", 0)]) == [ErrorCode.NETWORK_EXCEPTION]
    waiting = [asyncio.create_task(sender._send(DEAD, 7, 0, True, 4, [("t", 0)])) for _ in range(3)]
    assert await asyncio.gather(*waiting) == [[ErrorCode.NETWORK_EXCEPTION]] * 3
    assert FakeConnection.attempts == [DEAD]
    monkeypatch.setattr(peers_module, "CONNECT_BACKOFF_S", 0.0)
    assert await sender._send(DEAD, 7, 0, True, 4, [("t", 0)]) == [ErrorCode.NETWORK_EXCEPTION]
    assert FakeConnection.attempts == [DEAD, DEAD]
    await sender._peers.close()


async def test_a_round_asks_every_leader_at_once(monkeypatch) -> None:
    """A round does not finish one leader before asking the next: the healthy broker's marker is
    written while the dead broker's connect still hangs, and the round returns only the dead one's."""
    sender = _sender(monkeypatch, TopicsByName(t=SplitTopic()))
    requested: list[int] = []
    answer = FakeConnection.request

    async def recording(self, request, version):
        requested.append(self.node_id)
        return await answer(self, request, version)
    monkeypatch.setattr(FakeConnection, "request", recording)
    round_ = asyncio.create_task(sender.send_round(7, 0, True, 4, {("t", 0), ("t", 1)}))
    async with asyncio.timeout(2):  # the dead broker (the first leader in the round) still connecting
        while HEALTHY not in requested:
            await asyncio.sleep(0.01)
    assert DEAD in FakeConnection.attempts and not round_.done()
    FakeConnection.release.set()
    assert await round_ == {("t", 0)}
    await sender._peers.close()


async def test_a_leader_without_write_txn_markers_v2_is_sent_v1(monkeypatch) -> None:
    """An older Ebb (WriteTxnMarkers 0-1, mid rolling upgrade) gets v1 without the ignorable
    TransactionVersion, as Kafka's coordinator picks the version from ApiVersions: v2 there would be
    refused at every round and the partition's LSO would never move."""
    sender = _sender(monkeypatch)
    monkeypatch.setattr(FakeConnection, "api_versions", {ApiKey.WRITE_TXN_MARKERS: (0, 1)})
    assert await sender._send(HEALTHY, 7, 3, True, 4, [("t", 1)], transaction_version=2) == [ErrorCode.NONE]
    monkeypatch.setattr(FakeConnection, "api_versions", {ApiKey.WRITE_TXN_MARKERS: (0, 2)})
    await sender._peers.close()
    assert await sender._send(HEALTHY, 7, 3, True, 4, [("t", 1)], transaction_version=2) == [ErrorCode.NONE]
    assert FakeConnection.sent == [(HEALTHY, 1), (HEALTHY, 2)]
    await sender._peers.close()


async def test_a_marker_the_leader_can_never_write_is_settled(monkeypatch) -> None:
    """UNSUPPORTED_VERSION and UNSUPPORTED_FOR_MESSAGE_FORMAT: Kafka 4.3.1's coordinator drops the
    partition from those waiting for markers; retrying would hold the transaction (and the LSO) forever."""
    sender = _sender(monkeypatch, TopicsByName(t=SplitTopic()))
    for code in (ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT):
        monkeypatch.setattr(FakeConnection, "answer", code)
        assert await sender.send_round(7, 0, True, 4, {("t", 1)}, 2) == set()
    monkeypatch.setattr(FakeConnection, "answer", ErrorCode.NOT_ENOUGH_REPLICAS)  # while a retriable one is retried
    assert await sender.send_round(7, 0, True, 4, {("t", 1)}, 2) == {("t", 1)}
    await sender._peers.close()
