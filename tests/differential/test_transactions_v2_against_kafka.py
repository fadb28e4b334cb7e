"""Apache Kafka 4.3.1 (which finalizes transaction.version=2 on a new cluster) and Ebb answer
transactions version 2 (KIP-890 part 2) the same way: ApiVersions' transaction.version feature
entries at v3 and v4; EndTxn v5's epoch bump, its retries and fencing (Kafka's table in
broker/txn/tv2.py) and the producer id and epoch it answers; Produce v12 adding its partition to the
transaction (v11 still refused without AddPartitionsToTxn), with the records read back at both
isolation levels; TxnOffsetCommit v5 adding the group without AddOffsetsToTxn, the offsets settled
by the commit; WriteTxnMarkers v2 markers of transactions version 2 (an epoch above the producer's,
their retry); the sequences a producer starts the next transaction at after the commit's marker.

Producer ids are each broker's own (ignored); ApiVersions is compared on the transaction.version
entries only (Kafka lists KRaft features Ebb does not serve: broker/features.py) and its
FinalizedFeaturesEpoch is each cluster's own."""

from __future__ import annotations

import pytest

from protocol.enums import IsolationLevel
from protocol.errors import ErrorCode
from protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from protocol.records import build_batch
from tests.broker.data_wire import list_offsets_request, produce_request
from tests.differential.runner import Peer, compare
from tests.differential.test_transactions_against_kafka import (
    T0,
    _both_levels,
    _create,
    _end,
    _latest,
    _marker_codes,
    _markers,
    _ready_producer,
    _wait,
)

pytestmark = pytest.mark.timeout(300)

COMMITTED = IsolationLevel.READ_COMMITTED
TOPIC = "dti"  # the topic the shared fetch helpers read
ALLOWED: dict[tuple[str, str], str] = {
    ("*", "error_message"): "free text: whether a message is given and its wording are Kafka's own choice",
}


def _ignored(path: str) -> bool:
    return path.endswith("producer_id") or path.endswith("finalized_features_epoch")


def api_version_features(peer: Peer) -> None:
    for version in (3, 4):
        answer = peer.send(ApiVersionsRequest(client_software_name="ebb-diff", client_software_version="1"), version)
        peer.record(f"ApiVersions v{version}: transaction.version", ApiVersionsResponse(
            error_code=answer.error_code, api_keys=[],
            supported_features=[f for f in answer.supported_features if f.name == "transaction.version"],
            finalized_features=[f for f in answer.finalized_features if f.name == "transaction.version"],
            finalized_features_epoch=answer.finalized_features_epoch))


def _batch(pid: int, epoch: int, sequence: int, *values: bytes) -> bytes:
    return build_batch([(None, v, [], T0) for v in values], producer_id=pid, producer_epoch=epoch,
                       base_sequence=sequence, is_transactional=True)


def _settled(peer: Peer) -> None:
    _wait(f"{peer.name}: the marker", lambda: _latest(peer, COMMITTED) == _latest(peer, 0))


def end_txn_v5(peer: Peer) -> None:
    _create(peer, TOPIC)
    ids = _ready_producer(peer, "tv2-txn")
    pid, epoch = ids.producer_id, ids.producer_epoch
    peer.ask("v11 batch without AddPartitionsToTxn", produce_request(
        TOPIC, 0, _batch(pid, epoch, 0, b"v11"), acks=-1, transactional_id="tv2-txn"), 11)
    peer.ask("v12 batch adds its partition", produce_request(
        TOPIC, 0, _batch(pid, epoch, 0, b"a0", b"a1"), acks=-1, transactional_id="tv2-txn"), 12)
    peer.ask("v12 batch of a stale epoch", produce_request(
        TOPIC, 0, _batch(pid, epoch - 1 if epoch else epoch + 5, 0, b"x"), acks=-1, transactional_id="tv2-txn"), 12)
    _both_levels(peer, "open")
    peer.ask("end v5, commit of a stale epoch", _end("tv2-txn", pid, epoch + 1, True), 5)
    peer.ask("end v5, unknown id", _end("nobody", pid, epoch, True), 5)
    peer.ask("end v5, empty id", _end("", pid, epoch, True), 5)
    aborted = peer.ask("end v5, abort: the epoch is bumped", _end("tv2-txn", pid, epoch, False), 5)
    _settled(peer)
    _both_levels(peer, "aborted")
    peer.ask("end v5, the abort retried", _end("tv2-txn", pid, epoch, False), 5)
    peer.ask("end v5, commit at the old epoch after the abort", _end("tv2-txn", pid, epoch, True), 5)
    epoch = aborted.producer_epoch
    peer.ask("end v5, commit with nothing open", _end("tv2-txn", pid, epoch, True), 5)
    peer.ask("v12 batch at the bumped epoch", produce_request(
        TOPIC, 0, _batch(pid, epoch, 0, b"c0"), acks=-1, transactional_id="tv2-txn"), 12)
    committed = peer.ask("end v5, commit", _end("tv2-txn", pid, epoch, True), 5)
    _settled(peer)
    _both_levels(peer, "committed")
    peer.ask("end v5, the commit retried", _end("tv2-txn", pid, epoch, True), 5)
    peer.ask("end v5, abort at the old epoch after the commit", _end("tv2-txn", pid, epoch, False), 5)
    epoch = committed.producer_epoch
    peer.ask("end v5, commit again at the new epoch", _end("tv2-txn", pid, epoch, True), 5)
    empty = peer.ask("end v5, abort with nothing open: bumped", _end("tv2-txn", pid, epoch, False), 5)
    _settled(peer)
    peer.ask("end v4 at the bumped epoch with nothing open", _end("tv2-txn", pid, empty.producer_epoch, True), 4)
    peer.ask("end v5, a future epoch", _end("tv2-txn", pid, empty.producer_epoch + 3, False), 5)


def _offset_commit(pid: int, epoch: int, offset: int) -> TxnOffsetCommitRequest:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    return TxnOffsetCommitRequest(
        transactional_id="tv2-offsets", group_id="tv2-group", producer_id=pid, producer_epoch=epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[T(name=TOPIC, partitions=[T.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="m")])])


def _fetch_offsets(peer: Peer, label: str) -> None:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    peer.ask(label, OffsetFetchRequest(group_id="tv2-group", topics=[T(name=TOPIC, partition_indexes=[0])],
                                       require_stable=True), 7)


def txn_offset_commit_v5(peer: Peer) -> None:
    _create(peer, TOPIC)
    _wait(f"{peer.name}: a group coordinator", lambda: peer.send(FindCoordinatorRequest(
        key_type=0, coordinator_keys=["tv2-group"]), 4).coordinators[0].error_code == ErrorCode.NONE)
    ids = _ready_producer(peer, "tv2-offsets")
    pid, epoch = ids.producer_id, ids.producer_epoch
    peer.ask("v4 without AddOffsetsToTxn", _offset_commit(pid, epoch, 3), 4)
    peer.ask("v5 adds the group", _offset_commit(pid, epoch, 5), 5)
    peer.ask("v5 of a fenced epoch", _offset_commit(pid, epoch + 1, 6), 5)
    _fetch_offsets(peer, "offsets while open")
    peer.ask("commit", _end("tv2-offsets", pid, epoch, True), 5)
    _wait(f"{peer.name}: the offsets settle", lambda: peer.send(OffsetFetchRequest(
        group_id="tv2-group", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])],
        require_stable=True), 7).topics[0].partitions[0].committed_offset == 5)
    _fetch_offsets(peer, "offsets after the commit")


def _tv2_marker(pid: int, epoch: int, commit: bool, transaction_version: int = 2):
    request = _markers("dtm2", [0], pid, epoch, commit, 0)
    request.markers[0].transaction_version = transaction_version
    return request


def version_2_markers(peer: Peer) -> None:
    """WriteTxnMarkers v2 naming transactions version 2, as a coordinator (or `kafka-transactions
    abort`) sends it to the partition's leader: the epoch must be above the producer's."""
    _create(peer, "dtm2")
    ids = _ready_producer(peer, "dtm2-txn")
    pid, epoch = ids.producer_id, ids.producer_epoch
    batch = produce_request("dtm2", 0, _batch(pid, epoch, 0, b"m0"), acks=-1, transactional_id="dtm2-txn")
    _wait(f"{peer.name}: the transactional batch", lambda: peer.send(batch, 12).responses[0]
          .partition_responses[0].error_code == ErrorCode.NONE)
    stale = peer.ask("v2 marker at the producer's epoch", _tv2_marker(pid, epoch, True), 2)
    assert _marker_codes(stale) == [ErrorCode.INVALID_PRODUCER_EPOCH], (peer.name, stale)
    peer.ask("v2 marker below it", _tv2_marker(pid, epoch - 1 if epoch else epoch, True), 2)
    peer.ask("v2 marker at the bumped epoch", _tv2_marker(pid, epoch + 1, True), 2)
    _wait(f"{peer.name}: the marker is stable", lambda: peer.send(list_offsets_request(
        "dtm2", 0, -1, isolation_level=COMMITTED), 7).topics[0].partitions[0].offset == 2)
    peer.ask("the same marker again", _tv2_marker(pid, epoch + 1, True), 2)
    peer.ask("latest, read_committed", list_offsets_request("dtm2", 0, -1, isolation_level=COMMITTED), 7)


def _not_concurrent(peer: Peer, request, label: str,
                    retried: ErrorCode = ErrorCode.CONCURRENT_TRANSACTIONS) -> None:
    """Record the answer once it is not `retried`: CONCURRENT_TRANSACTIONS until the coordinator has
    written Complete, NOT_LEADER_OR_FOLLOWER until Kafka's partition has taken the leadership its
    metadata already shows."""
    answers: list = []
    _wait(f"{peer.name}: {label}", lambda: answers.append(peer.send(request, 12))
          or answers[-1].responses[0].partition_responses[0].error_code != retried)
    peer.record(label, answers[-1])


def sequences_after_the_bump(peer: Peer) -> None:
    """The commit's marker moves the producer to the bumped epoch with no batch there: the next
    transaction's batches start at sequence 0 (Kafka's checkSequence), so a later batch that overtook a
    refused first one is refused too (franz-go's TestTxnEtl). A batch of the fenced epoch then is
    INVALID_PRODUCER_EPOCH and bounds no sequence of the live one (maybeStartTransactionVerification)."""
    _create(peer, "dts")
    ids = _ready_producer(peer, "tv2-seq")
    pid, epoch = ids.producer_id, ids.producer_epoch

    def batch(epoch: int, sequence: int, *values: bytes):
        return produce_request("dts", 0, _batch(pid, epoch, sequence, *values), acks=-1, transactional_id="tv2-seq")

    _not_concurrent(peer, batch(epoch, 0, b"a0", b"a1"), "first transaction", ErrorCode.NOT_LEADER_OR_FOLLOWER)
    epoch = peer.ask("commit", _end("tv2-seq", pid, epoch, True), 5).producer_epoch
    _not_concurrent(peer, batch(epoch, 2, b"b2"), "the next transaction's batch at sequence 2")
    peer.ask("at sequence 0", batch(epoch, 0, b"b0", b"b1"), 12)
    peer.ask("then at 2", batch(epoch, 2, b"b2"), 12)
    # a zombie at the epoch before (Kafka Streams' fencing) is refused and leaves nothing that would
    # refuse the live producer's next sequence
    peer.ask("a zombie at the epoch before, sequence 1", batch(epoch - 1, 1, b"z1"), 12)
    peer.ask("the live producer at 3", batch(epoch, 3, b"b3"), 12)
    peer.ask("latest", list_offsets_request("dts", 0, -1), 7)


SCENARIOS = [api_version_features, end_txn_v5, txn_offset_commit_v5, version_2_markers, sequences_after_the_bump]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_same_transactions_v2_answers_as_kafka(scenario, ebb_peer, kafka_peer):
    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED, ignore=_ignored)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
