"""Apache Kafka 4.3.1 and Ebb verify TxnOffsetCommit's transaction the way they verify Produce's, at
every TxnOffsetCommit version both serve (v0-5): the group coordinator asks the id's transaction
coordinator whether the group's `__consumer_offsets` partition is in the producer's transaction only
where that producer has no transaction open on the partition yet, so

- offsets of a producer whose transaction is open on the offsets partition are written without asking
  (even under another transactional id: the coordinator would not know that producer there);
- a producer with nothing open there is asked about: the group not added to its transaction is
  INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4), a fenced epoch INVALID_PRODUCER_EPOCH.

Both brokers coordinate the ids and the group themselves (one node each); the offsets are compared
once the transaction commits."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.messages import AddOffsetsToTxnRequest, FindCoordinatorRequest, OffsetFetchRequest, TxnOffsetCommitRequest
from tests.differential.runner import Peer, compare
from tests.differential.test_produce_txn_verification_against_kafka import _create, _producer
from tests.differential.test_transactions_against_kafka import _end, _wait

pytestmark = pytest.mark.timeout(300)

VERSIONS = range(0, 6)
GROUP = "dto-group"
TOPIC = "dto"
ALLOWED: dict[tuple[str, str], str] = {
    ("*", "error_message"): "free text: whether a message is given and its wording are Kafka's own choice",
}
_Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic


def _ignored(path: str) -> bool:
    return path.endswith("producer_id")  # each broker hands out its own


def _commit(transactional_id: str, producer: tuple[int, int], offset: int) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(
        transactional_id=transactional_id, group_id=GROUP, producer_id=producer[0], producer_epoch=producer[1],
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[_Topic(name=TOPIC, partitions=[_Topic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="m")])])


def _offsets() -> OffsetFetchRequest:
    return OffsetFetchRequest(group_id=GROUP, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])], require_stable=True)


def open_on_the_offsets_partition(peer: Peer) -> None:
    _create(peer, TOPIC, 1)
    _wait(f"{peer.name}: a group coordinator", lambda: peer.send(FindCoordinatorRequest(
        key_type=0, coordinator_keys=[GROUP]), 4).coordinators[0].error_code == ErrorCode.NONE)
    a, b = _producer(peer, "dto-a"), _producer(peer, "dto-b")
    peer.ask("add the group to b's transaction", AddOffsetsToTxnRequest(
        transactional_id="dto-b", producer_id=b[0], producer_epoch=b[1], group_id=GROUP), 3)
    peer.ask("b's first offsets", _commit("dto-b", b, 1), 3)
    for version in VERSIONS:
        peer.ask(f"v{version}: b's offsets under a's id, b's transaction open on the offsets partition",
                 _commit("dto-a", b, 10 + version), version)
        if version < 5:  # v5 would add the group to a's transaction
            peer.ask(f"v{version}: a's offsets, the group not in a's transaction", _commit("dto-a", a, 20), version)
        peer.ask(f"v{version}: b's offsets at the next epoch", _commit("dto-b", (b[0], b[1] + 1), 30), version)
        peer.ask(f"v{version}: b's next offsets", _commit("dto-b", b, 40 + version), version)
    peer.ask("commit b's transaction", _end("dto-b", *b, True), 3)
    _wait(f"{peer.name}: the offsets settle",
          lambda: peer.send(_offsets(), 7).topics[0].partitions[0].error_code == ErrorCode.NONE)
    peer.ask("the group's offsets after the commit", _offsets(), 7)


SCENARIOS = [open_on_the_offsets_partition]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_same_txn_offset_commit_verification_as_kafka(scenario, ebb_peer, kafka_peer):
    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED, ignore=_ignored)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
