"""Apache Kafka 4.3.1 and Ebb verify a Produce request's transactional batches the same way, at every
Produce version both serve (v3-12; v12 is transactions version 2, where the leader adds the partition):

- a request whose transactional batches carry more than one producer (two ids, or one id at two
  epochs) is refused whole: every partition it names, with or without transactional records, even
  one of an unknown topic, is answered INVALID_PRODUCER_ID_MAPPING and nothing is written; one
  transactional producer beside an idempotent one is answered partition by partition;
- a batch of a transaction already open on its partition is not verified with the coordinator (it
  is written even under another transactional id), while one where its producer has no transaction
  open is (another id's producer: INVALID_PRODUCER_ID_MAPPING; an epoch above the open one's:
  fenced);
- before any transactional id exists (no `__transaction_state`) no coordinator can verify a batch;
- transactional records in a request without a transactional id refuse it whole
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition);
- a client's transactional control batch is verified as any transactional batch (the coordinator's
  refusal is its answer; at v12 the coordinator adds its partition) before the log refuses it
  INVALID_RECORD; a control batch outside transactions is INVALID_RECORD at once.

Both brokers coordinate the ids themselves (one node each). The records are read back and compared
as a reader sees them (offsets, values, transactional and control flags)."""

from __future__ import annotations

import pytest

from protocol.control_records import ControlType, build_marker_batch, read_marker
from protocol.errors import ErrorCode
from protocol.messages import CreateTopicsRequest, InitProducerIdRequest, ProduceRequest
from protocol.records import build_batch, iter_batches
from tests.broker.data_wire import fetch_request, list_offsets_request
from tests.differential.runner import Peer, compare
from tests.differential.test_transactions_against_kafka import T0, _add, _end, _ready_producer, _wait

pytestmark = pytest.mark.timeout(300)

VERSIONS = range(3, 13)
ALLOWED: dict[tuple[str, str], str] = {
    ("*", "error_message"): "free text: whether a message is given and its wording are Kafka's own choice",
}
_Data = ProduceRequest.TopicProduceData


def _ignored(path: str) -> bool:
    return path.endswith("producer_id")  # each broker hands out its own


def _create(peer: Peer, name: str, partitions: int) -> None:
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    peer.send(CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7)
    peer.wait_for_leaders(name, partitions)


def _batch(producer: tuple[int, int], sequence: int, value: bytes, transactional: bool = True) -> bytes:
    return build_batch([(None, value, [], T0)], producer_id=producer[0], producer_epoch=producer[1],
                       base_sequence=sequence, is_transactional=transactional)


def _produce(transactional_id: str | None, topics: dict[str, dict[int, bytes]]) -> ProduceRequest:
    return ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=30_000, topic_data=[
        _Data(name=name, partition_data=[_Data.PartitionProduceData(index=i, records=data)
                                         for i, data in parts.items()])
        for name, parts in topics.items()])


def _written(answer, partition: int) -> int:
    """1 if the answer says the partition's batch was written (the producer's next sequence moves on)."""
    return int(any(p.index == partition and p.error_code == ErrorCode.NONE
                   for t in answer.responses for p in t.partition_responses))


def _producer(peer: Peer, transactional_id: str) -> tuple[int, int]:
    ids = _ready_producer(peer, transactional_id)
    # a timeout that outlasts the scenario: Kafka would abort the transaction otherwise
    ids = peer.send(InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=600_000), 4)
    assert ids.error_code == ErrorCode.NONE, (peer.name, ids)
    return ids.producer_id, ids.producer_epoch


def _read(peer: Peer, label: str, topic: str, partitions: int) -> None:
    """What a read_uncommitted reader sees in each partition, recorded."""
    for index in range(partitions):
        answer = peer.send(fetch_request(topic, index, 0), 12)
        part = answer.responses[0].partitions[0]
        seen = [(b.base_offset, "marker", read_marker(b)[0]) if b.is_control else
                (b.base_offset, b.is_transactional, [r.value for r in b.records()])
                for b in iter_batches(bytes(part.records))]
        part.records = repr(seen).encode()
        peer.record(f"{label}: {topic}-{index}", answer)


def _settled(peer: Peer, topic: str, partition: int) -> None:
    def stable() -> bool:
        offsets = [peer.send(list_offsets_request(topic, partition, -1, isolation_level=level), 7)
                   .topics[0].partitions[0].offset for level in (0, 1)]
        return offsets[0] == offsets[1]
    _wait(f"{peer.name}: {topic}-{partition} settled", stable)


def before_any_coordinator(peer: Peer) -> None:
    """First in the module: neither broker has `__transaction_state` yet (run alone, later, both have
    it, and both answer for an id they do not know instead)."""
    _create(peer, "dpv-early", 1)
    for version in (3, 11, 12):
        peer.ask(f"v{version}: a transactional batch before any transactional id", _produce(
            "dpv-nobody", {"dpv-early": {0: _batch((1, 0), 0, b"early")}}), version)


def two_producers(peer: Peer) -> None:
    _create(peer, "dpv", 3)
    a, b = _producer(peer, "dpv-a"), _producer(peer, "dpv-b")
    idempotent = peer.send(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)
    c = (idempotent.producer_id, idempotent.producer_epoch)
    peer.ask("add dpv-0 to a's transaction", _add("dpv", "dpv-a", *a), 3)
    a_seq = _written(peer.ask("a's first batch", _produce("dpv-a", {"dpv": {0: _batch(a, 0, b"a")}}), 9), 0)
    c_seq = 0
    for version in VERSIONS:
        peer.ask(f"v{version}: two producers' transactional batches", _produce("dpv-a", {
            "dpv": {0: _batch(a, a_seq, b"two"), 1: _batch(b, 0, b"two"), 2: _batch((-1, -1), -1, b"plain", False)},
            "no-such-topic": {0: _batch(a, a_seq, b"two")}}), version)
        peer.ask(f"v{version}: one producer at two epochs", _produce("dpv-a", {
            "dpv": {0: _batch(a, a_seq, b"epochs"), 1: _batch((a[0], a[1] + 1), 0, b"epochs")}}), version)
        answer = peer.ask(f"v{version}: one transactional producer beside an idempotent one", _produce("dpv-a", {
            "dpv": {0: _batch(a, a_seq, f"a{version}".encode()), 2: _batch(c, c_seq, b"c", False)}}), version)
        a_seq += _written(answer, 0)
        c_seq += _written(answer, 2)
    peer.ask("abort a's transaction", _end("dpv-a", *a, False), 3)
    _settled(peer, "dpv", 0)
    _read(peer, "after the abort", "dpv", 3)


def open_transaction(peer: Peer) -> None:
    _create(peer, "dpo", 2)
    a, b = _producer(peer, "dpo-a"), _producer(peer, "dpo-b")
    peer.ask("add dpo-0 to b's transaction", _add("dpo", "dpo-b", *b), 3)
    b_seq = _written(peer.ask("b's first batch", _produce("dpo-b", {"dpo": {0: _batch(b, 0, b"b")}}), 9), 0)
    for version in VERSIONS:
        answer = peer.ask(f"v{version}: b's batch under a's id, b's transaction open on the partition", _produce(
            "dpo-a", {"dpo": {0: _batch(b, b_seq, f"under a, v{version}".encode())}}), version)
        b_seq += _written(answer, 0)
        peer.ask(f"v{version}: b's batch under a's id, no transaction of b's on the partition", _produce(
            "dpo-a", {"dpo": {1: _batch(b, 0, b"nowhere")}}), version)
        if version < 12:  # at v12 the leader adds the partition (test_transactions_v2_against_kafka.py)
            peer.ask(f"v{version}: a batch of a's producer on b's open partition, not added to a's", _produce(
                "dpo-a", {"dpo": {0: _batch(a, 0, b"a")}}), version)
            peer.ask(f"v{version}: b's batch at the next epoch on its open partition", _produce(
                "dpo-b", {"dpo": {0: _batch((b[0], b[1] + 1), 0, b"bumped")}}), version)
        answer = peer.ask(f"v{version}: b's next batch", _produce(
            "dpo-b", {"dpo": {0: _batch(b, b_seq, f"b v{version}".encode())}}), version)
        b_seq += _written(answer, 0)
    peer.ask("abort b's transaction", _end("dpo-b", *b, False), 3)
    _settled(peer, "dpo", 0)
    _read(peer, "after the abort", "dpo", 2)


def without_transactional_id(peer: Peer) -> None:
    """Transactional records in a request without a transactional id: refused whole, wherever they are
    (a partition Kafka would otherwise answer, one of an unknown topic, one whose records hold two batches)."""
    _create(peer, "dpn", 2)
    plain = _batch((-1, -1), -1, b"plain", False)
    for version in VERSIONS:
        peer.ask(f"v{version}: a transactional batch beside a plain one", _produce(None, {
            "dpn": {0: _batch((1, 0), 0, b"txn"), 1: plain}}), version)
        peer.ask(f"v{version}: a transactional batch to an unknown topic beside a plain one", _produce(None, {
            "dpn": {1: plain}, "no-such-topic": {0: _batch((1, 0), 0, b"txn")}}), version)
        peer.ask(f"v{version}: a transactional batch followed by a second batch", _produce(None, {
            "dpn": {0: _batch((1, 0), 0, b"txn") + plain, 1: plain}}), version)
    _read(peer, "nothing written", "dpn", 2)


def control_batches(peer: Peer) -> None:
    """A marker sent by a client, on a partition in the producer's transaction and on one not in it:
    v3-11 in a transaction of version 1 (AddPartitionsToTxn, EndTxn v3), v12 in one of version 2 (its
    partitions added by the leader, EndTxn v5)."""
    _create(peer, "dpc", 2)
    a = _producer(peer, "dpc-a")
    peer.ask("add dpc-0 to a's transaction", _add("dpc", "dpc-a", *a), 3)
    peer.ask("a's first batch", _produce("dpc-a", {"dpc": {0: _batch(a, 0, b"a")}}), 9)
    for version in range(3, 12):
        _control_batches(peer, "dpc-a", a, version)
    peer.ask("abort a's transaction", _end("dpc-a", *a, False), 3)
    _settled(peer, "dpc", 0)
    b = _producer(peer, "dpc-b")
    peer.ask("v12: b's first batch adds dpc-0", _produce("dpc-b", {"dpc": {0: _batch(b, 0, b"b")}}), 12)
    _control_batches(peer, "dpc-b", b, 12)
    peer.ask("abort b's transaction", _end("dpc-b", *b, False), 5)
    _settled(peer, "dpc", 0)
    _settled(peer, "dpc", 1)
    _read(peer, "after the aborts", "dpc", 2)


def _control_batches(peer: Peer, transactional_id: str, producer: tuple[int, int], version: int) -> None:
    marker = build_marker_batch(ControlType.ABORT, *producer, 0, T0)
    peer.ask(f"v{version}: a control batch on a partition in the transaction", _produce(
        transactional_id, {"dpc": {0: marker}}), version)
    peer.ask(f"v{version}: a control batch on a partition not in the transaction", _produce(
        transactional_id, {"dpc": {1: marker}}), version)
    peer.ask(f"v{version}: a control batch outside transactions", _produce(None, {"dpc": {1: build_batch(
        [(None, b"c", [], T0)], producer_id=producer[0], producer_epoch=producer[1], is_control=True)}}), version)


SCENARIOS = [before_any_coordinator, two_producers, open_transaction, without_transactional_id, control_batches]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_same_produce_verification_as_kafka(scenario, ebb_peer, kafka_peer):
    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED, ignore=_ignored)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
