"""Apache Kafka 4.3.1 and Ebb answer the transactional APIs the same way: the coordinator's answers
(InitProducerId with a transactional id, AddPartitionsToTxn, EndTxn, FindCoordinator for transaction
keys) valid and invalid (unknown ids, wrong producer ids, fenced epochs, bad timeouts, nothing to
end); AddPartitionsToTxn v4-5's verify-only and batched forms; the partition leader's answers to
WriteTxnMarkers as a coordinator would send it (unknown topics and partitions, a fenced producer
epoch, a fenced coordinator epoch, a producer the partition never saw) at both its versions; and
Fetch/ListOffsets at both isolation levels around open, aborted and committed transactions.

Producer ids are each broker's own (ignored); record data is compared as what a reader sees
(offsets, values, transactional and control flags), since the markers' timestamps are each
coordinator's."""

from __future__ import annotations

import time

import pytest

from protocol.control_records import read_marker
from protocol.enums import IsolationLevel
from protocol.errors import ErrorCode
from protocol.messages import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    WriteTxnMarkersRequest,
)
from protocol.records import build_batch, iter_batches
from tests.broker.data_wire import fetch_request, list_offsets_request, produce_request
from tests.differential.runner import Peer, compare
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

T0 = int(time.time() * 1000)  # recent: an old first timestamp would make Kafka roll a segment at the marker
COMMITTED = IsolationLevel.READ_COMMITTED
ALLOWED: dict[tuple[str, str], str] = {
    ("*", "error_message"): "free text: whether a message is given and its wording are Kafka's own choice",
}


def _ignored(path: str) -> bool:
    return path.endswith("producer_id")  # each broker hands out its own


def _wait(what: str, check, timeout_s: float = 30.0) -> None:
    wait_for(check, timeout_s=timeout_s, interval_s=0.1, what=what)


def _create(peer: Peer, name: str) -> None:
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
    peer.send(CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7)
    peer.wait_for_leaders(name, 1)


def _init(peer: Peer, transactional_id: str, timeout_ms: int = 60_000, version: int = 4):
    return peer.send(InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms),
                     version)


def _ready_producer(peer: Peer, transactional_id: str):
    """Kafka's coordinator loads `__transaction_state` after its creation: retry, unrecorded."""
    def found() -> bool:
        reply = peer.send(FindCoordinatorRequest(key_type=1, coordinator_keys=[transactional_id]), 4)
        return reply.coordinators[0].error_code == ErrorCode.NONE
    _wait(f"{peer.name}: a transaction coordinator", found)
    answers = []
    _wait(f"{peer.name}: InitProducerId", lambda: answers.append(_init(peer, transactional_id))
          or answers[-1].error_code == ErrorCode.NONE)
    return answers[-1]


def _add(topic: str, transactional_id: str, producer_id: int, epoch: int) -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])])


def _end(transactional_id: str, producer_id: int, epoch: int, commit: bool) -> EndTxnRequest:
    return EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
                         committed=commit)


def coordinator_answers(peer: Peer) -> None:
    _create(peer, "dtc")
    ids = _ready_producer(peer, "dtx")
    pid, epoch = ids.producer_id, ids.producer_epoch
    peer.ask("find coordinator v4", FindCoordinatorRequest(key_type=1, coordinator_keys=["dtx"]), 4)
    peer.ask("find coordinator v3", FindCoordinatorRequest(key_type=1, key="dtx"), 3)
    again = peer.ask("init again bumps the epoch", InitProducerIdRequest(
        transactional_id="dtx", transaction_timeout_ms=60_000), 4)
    peer.ask("init with a zero timeout", InitProducerIdRequest(transactional_id="dtx", transaction_timeout_ms=0), 4)
    peer.ask("init above transaction.max.timeout.ms", InitProducerIdRequest(
        transactional_id="dtx", transaction_timeout_ms=3_600_000), 4)
    peer.ask("init with an empty id", InitProducerIdRequest(transactional_id="", transaction_timeout_ms=60_000), 4)
    peer.ask("init v3 with a stranger's producer id", InitProducerIdRequest(
        transactional_id="dtx", transaction_timeout_ms=60_000, producer_id=pid + 1000, producer_epoch=0), 4)
    current = again.producer_epoch
    for version in (1, 3):
        peer.ask(f"add partitions v{version}, unknown id", _add("dtc", "nobody", pid, 0), version)
        peer.ask(f"add partitions v{version}, fenced epoch", _add("dtc", "dtx", pid, epoch), version)
        peer.ask(f"add partitions v{version}, unknown topic", _add("no-such-topic", "dtx", pid, current), version)
    for version in (1, 3, 4):
        peer.ask(f"end txn v{version}, nothing open", _end("dtx", pid, current, True), version)
        peer.ask(f"end txn v{version}, fenced epoch", _end("dtx", pid, epoch, False), version)
        peer.ask(f"end txn v{version}, unknown id", _end("nobody", pid, 0, True), version)
    peer.ask("add partitions", _add("dtc", "dtx", pid, current), 3)
    peer.ask("add them again", _add("dtc", "dtx", pid, current), 3)
    peer.ask("commit", _end("dtx", pid, current, True), 3)
    _wait(f"{peer.name}: the commit completes", lambda: peer.send(
        _end("dtx", pid, current, True), 3).error_code == ErrorCode.NONE)
    peer.ask("commit again: already done", _end("dtx", pid, current, True), 3)
    peer.ask("abort after the commit", _end("dtx", pid, current, False), 3)


def _latest(peer: Peer, isolation: int) -> int:
    return peer.send(list_offsets_request("dti", 0, -1, isolation_level=isolation), 7).topics[0].partitions[0].offset


def _fetch(peer: Peer, label: str, isolation: int) -> None:
    answer = peer.send(fetch_request("dti", 0, 0, isolation_level=isolation), 12)
    part = answer.responses[0].partitions[0]
    seen = []
    for batch in iter_batches(bytes(part.records)):
        if batch.is_control:
            seen.append((batch.base_offset, "marker", read_marker(batch)[0]))
        else:
            seen.append((batch.base_offset, batch.is_transactional, [r.value for r in batch.records()]))
    part.records = repr(seen).encode()
    peer.record(label, answer)


def _both_levels(peer: Peer, label: str) -> None:
    for isolation, name in ((0, "read_uncommitted"), (COMMITTED, "read_committed")):
        peer.ask(f"{label}: latest, {name}", list_offsets_request("dti", 0, -1, isolation_level=isolation), 7)
        _fetch(peer, f"{label}: fetch, {name}", isolation)


def isolation_levels(peer: Peer) -> None:
    _create(peer, "dti")
    ids = _ready_producer(peer, "dti-txn")
    pid, epoch = ids.producer_id, ids.producer_epoch

    def txn_batch(sequence: int, *values: bytes) -> bytes:
        return build_batch([(None, v, [], T0) for v in values], producer_id=pid, producer_epoch=epoch,
                           base_sequence=sequence, is_transactional=True)

    peer.ask("plain record", produce_request("dti", 0, build_batch([(None, b"plain", [], T0)]), acks=-1), 9)
    peer.ask("transactional batch before AddPartitionsToTxn", produce_request(
        "dti", 0, txn_batch(0, b"early"), acks=-1, transactional_id="dti-txn"), 9)
    peer.ask("add the partition", _add("dti", "dti-txn", pid, epoch), 3)
    peer.ask("transactional batch", produce_request(
        "dti", 0, txn_batch(0, b"t0", b"t1"), acks=-1, transactional_id="dti-txn"), 9)
    _both_levels(peer, "open")
    peer.ask("abort", _end("dti-txn", pid, epoch, False), 3)
    _wait(f"{peer.name}: the abort marker", lambda: _latest(peer, COMMITTED) == _latest(peer, 0))
    _both_levels(peer, "aborted")
    peer.ask("add the partition again", _add("dti", "dti-txn", pid, epoch), 3)
    peer.ask("next transactional batch", produce_request(
        "dti", 0, txn_batch(2, b"c0"), acks=-1, transactional_id="dti-txn"), 9)
    peer.ask("commit", _end("dti-txn", pid, epoch, True), 3)
    _wait(f"{peer.name}: the commit marker", lambda: _latest(peer, COMMITTED) == _latest(peer, 0))
    _both_levels(peer, "committed")


def _markers(topic: str, partitions: list[int], producer_id: int, epoch: int, commit: bool,
             coordinator_epoch: int) -> WriteTxnMarkersRequest:
    Marker = WriteTxnMarkersRequest.WritableTxnMarker  # noqa: N806
    return WriteTxnMarkersRequest(markers=[Marker(
        producer_id=producer_id, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[Marker.WritableTxnMarkerTopic(name=topic, partition_indexes=partitions)])])


def _marker_codes(answer) -> list[int]:
    return [p.error_code for m in answer.markers for t in m.topics for p in t.partitions]


def write_txn_markers(peer: Peer) -> None:
    _create(peer, "dtm")
    _ready_producer(peer, "dtm-txn")
    ids = _init(peer, "dtm-txn")  # epoch 1 now: a marker at epoch 0 is from a fenced producer
    pid, epoch = ids.producer_id, ids.producer_epoch
    peer.ask("add the partition", _add("dtm", "dtm-txn", pid, epoch), 3)
    batch = produce_request("dtm", 0, build_batch(
        [(None, b"m0", [], T0)], producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True),
        acks=-1, transactional_id="dtm-txn")
    # Kafka's new partition may answer NOT_LEADER_OR_FOLLOWER at first: retried, unrecorded.
    _wait(f"{peer.name}: the transactional batch", lambda: peer.send(batch, 9).responses[0]
          .partition_responses[0].error_code == ErrorCode.NONE)
    for version in (1, 2):
        peer.ask(f"v{version}: unknown topic", _markers("no-such-topic", [0], pid, epoch, True, 0), version)
        peer.ask(f"v{version}: unknown partition", _markers("dtm", [3], pid, epoch, True, 0), version)
        fenced = peer.ask(f"v{version}: fenced producer epoch", _markers("dtm", [0], pid, epoch - 1, False, 0),
                          version)
        assert _marker_codes(fenced) == [ErrorCode.INVALID_PRODUCER_EPOCH], (peer.name, fenced)
        peer.ask(f"v{version}: no markers", WriteTxnMarkersRequest(markers=[]), version)
    stranger = peer.ask("a producer the partition never saw", _markers("dtm", [0], pid + 77, 0, False, 0), 1)
    committed = peer.ask("commit marker at coordinator epoch 5", _markers("dtm", [0], pid, epoch, True, 5), 1)
    assert _marker_codes(stranger) == _marker_codes(committed) == [ErrorCode.NONE], (peer.name, stranger, committed)
    _wait(f"{peer.name}: the marker is stable", lambda: peer.send(
        list_offsets_request("dtm", 0, -1, isolation_level=COMMITTED), 7).topics[0].partitions[0].offset == 3)
    peer.ask("latest, read_committed", list_offsets_request("dtm", 0, -1, isolation_level=COMMITTED), 7)
    older = peer.ask("marker from an older coordinator epoch", _markers("dtm", [0], pid, epoch, False, 4), 2)
    assert _marker_codes(older) == [ErrorCode.TRANSACTION_COORDINATOR_FENCED], (peer.name, older)


def _batch_of(*transactions: tuple[str, int, int, bool, str]) -> AddPartitionsToTxnRequest:
    """AddPartitionsToTxn v4-5, as one broker sends it: (id, producer id, epoch, verify only, topic)."""
    Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction  # noqa: N806
    return AddPartitionsToTxnRequest(transactions=[Txn(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=verify,
        topics=[Txn.AddPartitionsToTxnTopic(name=topic, partitions=[0])]) for tid, pid, epoch, verify, topic in
        transactions])


def verify_only(peer: Peer) -> None:
    """KIP-890 part 1's broker-to-coordinator form (v4-5): whether partitions are in a producer's open
    transaction, and adding them, a batch of transactions at a time."""
    for name in ("dvo", "dvo-other"):
        _create(peer, name)
    ids = _ready_producer(peer, "dvo-txn")
    pid, epoch = ids.producer_id, ids.producer_epoch
    for version in (4, 5):
        peer.ask(f"v{version}: unknown id", _batch_of(("nobody", pid, 0, True, "dvo")), version)
        peer.ask(f"v{version}: empty id", _batch_of(("", pid, epoch, True, "dvo")), version)
        peer.ask(f"v{version}: no transaction open", _batch_of(("dvo-txn", pid, epoch, True, "dvo")), version)
        peer.ask(f"v{version}: wrong producer id", _batch_of(("dvo-txn", pid + 1000, epoch, True, "dvo")), version)
        peer.ask(f"v{version}: fenced epoch", _batch_of(("dvo-txn", pid, epoch + 1, True, "dvo")), version)
        peer.ask(f"v{version}: unknown topic", _batch_of(("dvo-txn", pid, epoch, True, "no-such-topic")), version)
    peer.ask("v4: add the partition (not verify-only)", _batch_of(("dvo-txn", pid, epoch, False, "dvo")), 4)
    for version in (4, 5):
        peer.ask(f"v{version}: in the transaction", _batch_of(("dvo-txn", pid, epoch, True, "dvo")), version)
        peer.ask(f"v{version}: not in the transaction", _batch_of(("dvo-txn", pid, epoch, True, "dvo-other")),
                 version)
        peer.ask(f"v{version}: two transactions", _batch_of(
            ("dvo-txn", pid, epoch, True, "dvo"), ("nobody", pid, 0, True, "dvo")), version)
    peer.ask("v3: the client's form still answers", _add("dvo-other", "dvo-txn", pid, epoch), 3)
    peer.ask("v5: both partitions in", _batch_of(("dvo-txn", pid, epoch, True, "dvo-other")), 5)
    peer.ask("commit", _end("dvo-txn", pid, epoch, True), 3)
    _wait(f"{peer.name}: the commit completes", lambda: peer.send(
        _end("dvo-txn", pid, epoch, True), 3).error_code == ErrorCode.NONE)
    peer.ask("v4: after the commit", _batch_of(("dvo-txn", pid, epoch, True, "dvo")), 4)


SCENARIOS = [coordinator_answers, isolation_levels, write_txn_markers, verify_only]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_same_transactional_answers_as_kafka(scenario, ebb_peer, kafka_peer):
    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED, ignore=_ignored)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
