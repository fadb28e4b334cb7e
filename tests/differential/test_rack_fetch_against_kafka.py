"""KIP-392 on one broker against Apache Kafka 4.3.1: both run with replica.selector.class set to Kafka's
RackAwareReplicaSelector and a broker.rack. The leader is the only replica, so every consumer Fetch
from v11 (the version carrying RackId) is read from the leader and names no PreferredReadReplica (-1),
whatever the consumer's rack: the consumer's own, another, or none."""

from __future__ import annotations

import pytest

from broker.config import RACK_AWARE_SELECTOR
from protocol.messages import FetchRequest
from tests.differential.runner import Peer, compare
from tests.differential.test_fetch_sessions_against_kafka import _filled

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"replica.selector.class": RACK_AWARE_SELECTOR, "broker.rack": "east"}


def rack_fetches(peer: Peer) -> None:
    topic_id = _filled(peer, "racks", partitions=1)
    Part = FetchRequest.FetchTopic.FetchPartition
    for version in range(11, 17):
        for rack in ("east", "west", ""):
            for offset in (0, 3):
                parts = [Part(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)]
                topic = (FetchRequest.FetchTopic(topic_id=topic_id, partitions=parts) if version >= 13
                         else FetchRequest.FetchTopic(topic="racks", partitions=parts))
                body = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                    session_id=0, session_epoch=-1, topics=[topic], rack_id=rack)
                peer.ask(f"v{version} rack {rack!r} from {offset}", body, version)


def test_a_lone_leader_names_no_preferred_replica_as_kafka(ebb_peer, kafka_peer):
    found = compare(rack_fetches, ebb_peer, kafka_peer, {("*", "error_message"): "free text"})
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
    fetches = {label: answer["responses"][0]["partitions"][0] for label, answer in ebb_peer.answers
               if " rack " in label}
    assert len(fetches) == 36
    assert all(p["preferred_read_replica"] == -1 and p["error_code"] == 0 for p in fetches.values())
    assert all(p["records"] for label, p in fetches.items() if label.endswith("from 0"))  # read from the leader
