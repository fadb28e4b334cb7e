"""Apache Kafka 4.3.1 and Ebb answer a Produce request that names one partition more than once the
same way, at every Produce version both serve (v3-12): Kafka keys what it checks and appends by
partition, so the last valid entry of a partition is the one written, an invalid entry's answer
stands over the written one's, the answer names each partition once (a topic named twice is one
topic in it), and only the entries kept count as the request's producers. Plain, idempotent and
transactional batches; a partition unknown or named with two transactional producers; acks 1, -1
and 0 (where no answer comes: whether the connection stays open, and what was written).

Producer ids are each broker's own (ignored); the records are compared as a reader sees them."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from protocol import framing
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest, InitProducerIdRequest, ProduceRequest
from tests.broker.wire_client import WireClient
from tests.differential.runner import Peer, compare
from tests.differential.test_produce_txn_verification_against_kafka import (
    _batch,
    _create,
    _producer,
    _read,
    _settled,
)
from tests.differential.test_transactions_against_kafka import _add, _end, _wait

pytestmark = pytest.mark.timeout(300)

VERSIONS = range(3, 13)
ALLOWED: dict[tuple[str, str], str] = {
    ("*", "error_message"): "free text: whether a message is given and its wording are Kafka's own choice",
}
_Data = ProduceRequest.TopicProduceData
_Part = _Data.PartitionProduceData
PLAIN = (-1, -1)


def _ignored(path: str) -> bool:
    return path.endswith("producer_id")  # each broker hands out its own


@dataclass
class Shape:
    """Which partitions an answer names, duplicates kept (the runner's comparison keys them by name)."""

    named: list[str]

    def to_dict(self) -> dict:
        return {"named": sorted(self.named)}


def _request(transactional_id: str | None, entries: list[tuple[str, list[tuple[int, bytes]]]],
             acks: int = -1) -> ProduceRequest:
    """Topics in the order given, a name as often as given, each with its (partition, records) entries."""
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=30_000, topic_data=[
        _Data(name=name, partition_data=[_Part(index=i, records=data) for i, data in parts])
        for name, parts in entries])


def _ask(peer: Peer, label: str, request: ProduceRequest, version: int):
    answer = peer.ask(label, request, version)
    peer.record(f"{label} (partitions named)", Shape(
        [f"{t.name}-{p.index}" for t in answer.responses for p in t.partition_responses]))
    return answer


@dataclass
class NoAnswer:
    """What an acks=0 request leaves: no answer, and whether the connection stayed open."""

    open: bool

    def to_dict(self) -> dict:
        return {"connection_open": self.open}


def _fire(peer: Peer, label: str, request: ProduceRequest, version: int) -> None:
    """An acks=0 request on its own connection; then ApiVersions shows whether the broker kept it open
    (its answer is the next frame: none came for the Produce)."""
    with WireClient(peer.port, timeout=30) as client:
        client.sock.sendall(framing.encode_request(request, version, 1, client.client_id))
        client.sock.sendall(framing.encode_request(ApiVersionsRequest(), 0, 2, client.client_id))
        try:
            correlation_id, _ = framing.decode_response(client.read_frame(), ApiVersionsRequest.api_key, 0)
            kept = correlation_id == 2
        except ConnectionError:
            kept = False
    peer.record(label, NoAnswer(kept))


def _idempotent_producer(peer: Peer) -> tuple[int, int]:
    """An idempotent producer's id and epoch; Kafka answers COORDINATOR_LOAD_IN_PROGRESS (id -1) until its
    controller has handed it a block of ids, and a batch of producer -1 is not idempotent: retried."""
    found: list = []
    _wait(f"{peer.name}: an idempotent producer id", lambda: found.append(peer.send(
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4))
        or found[-1].error_code == ErrorCode.NONE)
    return found[-1].producer_id, found[-1].producer_epoch


def plain_and_idempotent(peer: Peer) -> None:
    _create(peer, "dtw", 2)
    two_batches = _batch(PLAIN, -1, b"one", False) + _batch(PLAIN, -1, b"two", False)
    producer = _idempotent_producer(peer)
    sequences = [0, 0]  # the producer's next sequence on each partition
    for version in VERSIONS:
        v = f"v{version}"
        _ask(peer, f"{v}: plain twice", _request(None, [
            ("dtw", [(0, _batch(PLAIN, -1, f"{v} first".encode(), False)),
                     (0, _batch(PLAIN, -1, f"{v} second".encode(), False))])]), version)
        _ask(peer, f"{v}: the topic named twice", _request(None, [
            ("dtw", [(0, _batch(PLAIN, -1, f"{v} t1 p0".encode(), False))]),
            ("dtw", [(1, _batch(PLAIN, -1, f"{v} t2 p1".encode(), False)),
                     (0, _batch(PLAIN, -1, f"{v} t2 p0".encode(), False))])]), version)
        _ask(peer, f"{v}: a valid entry, then an invalid one", _request(None, [
            ("dtw", [(0, _batch(PLAIN, -1, f"{v} valid first".encode(), False)), (0, two_batches)])]), version)
        _ask(peer, f"{v}: an invalid entry, then a valid one", _request(None, [
            ("dtw", [(1, two_batches), (1, _batch(PLAIN, -1, f"{v} valid last".encode(), False))])]), version)
        _ask(peer, f"{v}: an unknown partition twice", _request(None, [
            ("dtw", [(7, _batch(PLAIN, -1, b"x", False)), (0, _batch(PLAIN, -1, f"{v} beside".encode(), False)),
                     (7, _batch(PLAIN, -1, b"y", False))]),
            ("no-such-topic", [(0, _batch(PLAIN, -1, b"z", False)), (0, _batch(PLAIN, -1, b"z", False))])]), version)
        answer = _ask(peer, f"{v}: idempotent, the same sequence twice", _request(None, [
            ("dtw", [(0, _batch(producer, sequences[0], f"{v} idem a".encode(), False)),
                     (0, _batch(producer, sequences[0], f"{v} idem b".encode(), False))])]), version)
        sequences[0] += answer.responses[0].partition_responses[0].error_code == 0
        answer = _ask(peer, f"{v}: idempotent, the next sequence after a retry", _request(None, [
            ("dtw", [(1, _batch(producer, sequences[1] + 1, f"{v} idem c".encode(), False)),
                     (1, _batch(producer, sequences[1], f"{v} idem d".encode(), False))])]), version)
        sequences[1] += answer.responses[0].partition_responses[0].error_code == 0
        _fire(peer, f"{v}: acks=0, plain twice", _request(None, [
            ("dtw", [(0, _batch(PLAIN, -1, f"{v} acks0 first".encode(), False)),
                     (0, _batch(PLAIN, -1, f"{v} acks0 second".encode(), False))])], acks=0), version)
        _fire(peer, f"{v}: acks=0, a valid entry, then an invalid one", _request(None, [
            ("dtw", [(1, _batch(PLAIN, -1, f"{v} acks0 valid".encode(), False)), (1, two_batches)])], acks=0),
            version)
    _ask(peer, "acks=1: plain twice", _request(None, [
        ("dtw", [(0, _batch(PLAIN, -1, b"acks1 first", False)), (0, _batch(PLAIN, -1, b"acks1 second", False))])],
        acks=1), 9)
    _read(peer, "written", "dtw", 2)


def transactional(peer: Peer) -> None:
    """Two producers' transactional batches on one partition are one producer to Kafka (the last entry's)."""
    _create(peer, "dtx2", 1)
    a, b = _producer(peer, "dtx2-a"), _producer(peer, "dtx2-b")
    peer.ask("add dtx2-0 to b's transaction", _add("dtx2", "dtx2-b", *b), 3)
    b_seq = 0
    for version in VERSIONS:
        v = f"v{version}"
        answer = _ask(peer, f"{v}: a's batch, then b's, under b's id", _request("dtx2-b", [
            ("dtx2", [(0, _batch(a, 0, f"{v} a".encode())), (0, _batch(b, b_seq, f"{v} b".encode()))])]), version)
        b_seq += answer.responses[0].partition_responses[0].error_code == 0
        _ask(peer, f"{v}: b's batch, then a's, under b's id", _request("dtx2-b", [
            ("dtx2", [(0, _batch(b, b_seq, f"{v} b first".encode())), (0, _batch(a, 0, f"{v} a last".encode()))])]),
            version)
        _ask(peer, f"{v}: b's batch twice, then a plain one", _request("dtx2-b", [
            ("dtx2", [(0, _batch(b, b_seq, f"{v} b1".encode())), (0, _batch(b, b_seq, f"{v} b2".encode())),
                      (0, _batch(PLAIN, -1, f"{v} plain".encode(), False))])]), version)
    peer.ask("abort b's transaction", _end("dtx2-b", *b, False), 3)
    _settled(peer, "dtx2", 0)
    _read(peer, "after the abort", "dtx2", 1)


SCENARIOS = [plain_and_idempotent, transactional]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_same_answers_to_one_partition_twice_as_kafka(scenario, ebb_peer, kafka_peer):
    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED, ignore=_ignored)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
