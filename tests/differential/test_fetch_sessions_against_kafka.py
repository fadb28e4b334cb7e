"""Fetch sessions (KIP-227) against Apache Kafka 4.3.1: the same session sequences at every Fetch version
both serve that has sessions (7-16), answers compared after the runner's normalising (a session id
is compared as given or not: each broker draws its own)."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.messages import CreateTopicsRequest, FetchRequest
from protocol.records import build_batch
from tests.broker.data_wire import produce_request
from tests.differential.runner import Peer, compare
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

T0 = 1_700_000_000_000
VERSIONS = range(7, 17)
NOT_LEADER_OR_FOLLOWER = ErrorCode.NOT_LEADER_OR_FOLLOWER


def _filled(peer: Peer, name: str, partitions: int = 2):
    """A topic with 3 records in each partition, made unrecorded (its configs are judged elsewhere)."""
    Topic = CreateTopicsRequest.CreatableTopic
    created = peer.send(CreateTopicsRequest(topics=[
        Topic(name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=30_000), 7)
    peer.wait_for_leaders(name, partitions)
    for p in range(partitions):
        _produce(peer, name, p, 3, f"produce to {name}-{p}")
    return created.topics[0].topic_id


def _produce(peer: Peer, name: str, partition: int, count: int, label: str) -> None:
    """Appended once the partition's leader takes it (Kafka's metadata names leaders a moment before
    they serve): only the accepted answer is judged."""
    data = build_batch([(b"k%d" % i, b"v%d" % i, [], T0 + i) for i in range(count)])
    answers = []

    def appended() -> bool:
        answers.append(peer.send(produce_request(name, partition, data, acks=-1), 9))
        return answers[-1].responses[0].partition_responses[0].error_code != NOT_LEADER_OR_FOLLOWER
    wait_for(appended, timeout_s=30, what=f"{peer.name}: {name}-{partition} taking records")
    peer.record(label, answers[-1])


class _Fetcher:
    """One fetcher's session on one peer: remembers the session id the broker gave it."""

    def __init__(self, peer: Peer, name: str, topic_id, version: int):
        self.peer, self.name, self.topic_id, self.version = peer, name, topic_id, version
        self.session_id = 0

    def ask(self, label: str, epoch: int, partitions=(), forget=(), session_id: int | None = None,
            version: int | None = None):
        version = self.version if version is None else version
        Part = FetchRequest.FetchTopic.FetchPartition
        parts = [Part(partition=p, fetch_offset=o, partition_max_bytes=1 << 20) for p, o in partitions]
        by_id = version >= 13
        topics = [FetchRequest.FetchTopic(topic_id=self.topic_id, partitions=parts) if by_id
                  else FetchRequest.FetchTopic(topic=self.name, partitions=parts)] if parts else []
        forgotten = [FetchRequest.ForgottenTopic(topic_id=self.topic_id, partitions=list(forget)) if by_id
                     else FetchRequest.ForgottenTopic(topic=self.name, partitions=list(forget))] if forget else []
        body = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                            session_id=self.session_id if session_id is None else session_id,
                            session_epoch=epoch, topics=topics, forgotten_topics_data=forgotten)
        answer = self.peer.ask(f"v{version} {label}", body, version)
        if epoch == 0:
            self.session_id = answer.session_id
        return answer


def session_sequence(peer: Peer) -> None:
    for version in VERSIONS:
        name = f"fs{version}"
        f = _Fetcher(peer, name, _filled(peer, name), version)
        f.ask("full fetch asking for a session", 0, [(0, 0), (1, 0)])
        f.ask("incremental at the end: nothing new", 1, [(0, 3), (1, 3)])
        _produce(peer, name, 1, 2, f"v{version} produce to partition 1")
        f.ask("incremental naming nothing: partition 1's new records", 2)
        f.ask("a wrong epoch", 7)
        f.ask("past the end: an error, always answered", 3, [(0, 9)])
        f.ask("the error again", 4)
        f.ask("forget partition 0", 5, forget=[0])
        _produce(peer, name, 0, 1, f"v{version} produce to the forgotten partition")
        f.ask("the forgotten partition stays out", 6, [(1, 5)])
        f.ask("forgetting the last partition closes the session", 7, forget=[1])
        f.ask("the closed session", 8)
        f.ask("a session that never was", 1, session_id=0)
        f.ask("a new session", 0, [(0, 0)])
        old = f.session_id
        f.ask("a sessionless full fetch naming the session closes it", -1, [(0, 0)])
        f.ask("the session it closed", 1, session_id=old)


def topic_ids_and_names_do_not_mix(peer: Peer) -> None:
    name = "fsmix"
    by_name = _Fetcher(peer, name, _filled(peer, name), 12)
    by_name.ask("a session with names", 0, [(0, 0)])
    by_name.ask("continued with ids", 1, version=13)
    by_id = _Fetcher(peer, name, by_name.topic_id, 13)
    by_id.ask("a session with ids", 0, [(0, 0)])
    by_id.ask("continued with names", 1, version=12)
    by_id.ask("continued with ids", 1)


SCENARIOS = [session_sequence, topic_ids_and_names_do_not_mix]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_same_session_answers_as_kafka(scenario, ebb_peer, kafka_peer):
    found = compare(scenario, ebb_peer, kafka_peer, {("*", "error_message"): "free text"})
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
