"""Kafka as the judge of compaction: the same keyed workload (updates, tombstones, a key written again
after its tombstone; tests/broker/compaction_workload.py) goes to Apache Kafka 4.3.1 and to Ebb with
the same topic configs; once both cleaners have cleaned every closed segment, the surviving
(offset, key, value) lists are equal, and so are Fetch answers from offsets inside and around the gaps
(batch headers and records, decoded) and ListOffsets by time, earliest, latest and max timestamp.
A record without a key is refused by both alike. Under compact,delete, DeleteRecords to offsets inside
gaps, and ListOffsets and Fetch after them, answer alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from protocol.messages import CreateTopicsRequest, DeleteRecordsRequest, FetchRequest, ListOffsetsRequest
from protocol.records import iter_batches
from tests.broker import compaction_workload as workload
from tests.differential.runner import Peer, compare
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

T0 = 1_700_000_000_000  # the first round's record timestamp; both brokers keep CreateTime as sent
_ONE_SEGMENT = ("Kafka answers a Fetch from the one segment holding the offset and stops at its end; Ebb goes on "
                "into the next segments up to max_bytes (not a compaction matter: the batches both return first "
                "are compared by the same answers, and by 'fetch small')")
ALLOWED = {
    ("*", "error_message"): "free text: whether a message is given and its wording are Kafka's own choice",
    ("*", "partial_tail_bytes"): "Kafka fills max_bytes with the start of the next batch, which clients drop; Ebb "
                                 "sends whole batches only",
    **{(label, "responses[0].partitions[0].records"): _ONE_SEGMENT
       for label in ("fetch from 0", "fetch inside the first gap", "fetch at the first survivor",
                     "fetch before the active segment")},
}


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"log.cleaner.backoff.ms": "50", "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024)}


@dataclass
class Decoded:
    """A Fetch answer with its record data decoded, so that what the broker chooses itself (the producer
    id it handed out, the delete horizon's wall-clock time, hence the CRC) is not compared byte by byte."""

    answer: Any

    def to_dict(self) -> dict:
        found = self.answer.to_dict()
        for topic in found["responses"]:
            for partition in topic["partitions"]:
                data = bytes(partition["records"] or b"")
                batches = list(iter_batches(data, allow_partial_tail=True))
                partition["records"] = [_batch(b) for b in batches]  # and a cut batch at the end, by size:
                partition["partial_tail_bytes"] = len(data) - sum(b.size for b in batches)
        return found


def _batch(batch) -> dict:
    return {"base_offset": batch.base_offset, "last_offset_delta": batch.last_offset_delta,
            "records_count": batch.records_count, "compression": int(batch.compression),
            "delete_horizon_set": batch.delete_horizon_ms is not None, "producer_epoch": batch.producer_epoch,
            "base_sequence": batch.base_sequence, "max_timestamp": batch.max_timestamp,
            "records": [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()]}


def fetch(peer: Peer, label: str, offset: int, max_bytes: int = 1 << 20, topic: str = "kept") -> None:
    Part = FetchRequest.FetchTopic.FetchPartition
    body = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                            Part(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])])
    peer.record(label, Decoded(peer.send(body, 12)))


def list_offsets(peer: Peer, label: str, timestamp: int, topic: str = "kept") -> None:
    Topic = ListOffsetsRequest.ListOffsetsTopic
    body = ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=5000, topics=[Topic(name=topic, partitions=[
        Topic.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    peer.ask(label, body, 8)


def _cleaned(peer: Peer, topic: str) -> list | None:
    """The records once no key repeats below the active segment (the round is over), else None."""
    found = workload.consume(f"127.0.0.1:{peer.port}", topic)
    keys = [key for offset, key, _ in found if offset < workload.ACTIVE_BASE]
    return found if len(found) < workload.RECORDS and len(keys) == len(set(keys)) else None


def _compacted(peer: Peer, topic: str, **configs: str) -> list:
    """The workload written to a new compacted topic, once cleaned: the surviving records."""
    Topic = CreateTopicsRequest.CreatableTopic
    settings = [Topic.CreatableTopicConfig(name=k, value=v) for k, v in {**workload.TOPIC_CONFIGS, **configs}.items()]
    peer.send(CreateTopicsRequest(topics=[Topic(name=topic, num_partitions=1, replication_factor=1,
                                                configs=settings)], timeout_ms=30_000), 7)
    peer.wait_for_leaders(topic, 1)
    workload.produce(f"127.0.0.1:{peer.port}", topic, start_ms=T0)
    return wait_for(lambda: _cleaned(peer, topic), timeout_s=120, what=f"{peer.name}'s cleaner")


def compacted_topic(peer: Peer) -> None:
    survivors = _compacted(peer, "kept")
    peer.answers.append(("surviving (offset, key, value)", {"records": survivors}))
    error = workload.produce_keyless(f"127.0.0.1:{peer.port}", "kept")
    peer.answers.append(("keyless record", {"error": error.code()}))
    first_kept = survivors[0][0]
    for label, offset in [("fetch from 0", 0), ("fetch inside the first gap", max(first_kept - 1, 0)),
                          ("fetch at the first survivor", first_kept), ("fetch before the active segment",
                                                                        workload.ACTIVE_BASE - 1)]:
        fetch(peer, label, offset)
    for offset in (0, first_kept - 1, workload.ACTIVE_BASE - 1):  # one batch each: what both return first, equal
        fetch(peer, f"fetch small from {offset}", offset, 200)
    for label, timestamp in [("earliest", -2), ("latest", -1), ("max timestamp", -3), ("by time: first round", T0),
                             ("by time: a cleaned round", T0 + 3 * 2000), ("by time: the last round", T0 + 22_000),
                             ("by time: after the last", T0 + 30_000)]:
        list_offsets(peer, f"list offsets {label}", timestamp)


def delete_records_across_the_gaps(peer: Peer) -> None:
    """cleanup.policy=compact,delete (no time retention): DeleteRecords to offsets inside gaps."""
    topic = "kept-deletable"
    survivors = _compacted(peer, topic, **{"cleanup.policy": "compact,delete", "retention.ms": "-1"})
    peer.answers.append(("surviving before deletions", {"records": survivors}))
    gap = next(o for o in range(survivors[0][0], workload.RECORDS) if o not in {s[0] for s in survivors})
    for label, offset in [("delete into the first gap", survivors[0][0] - 1), ("delete into a later gap", gap)]:
        Req = DeleteRecordsRequest
        peer.ask(label, Req(timeout_ms=30_000, topics=[Req.DeleteRecordsTopic(name=topic, partitions=[
            Req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=offset)])]), 2)
        list_offsets(peer, f"earliest after {label}", -2, topic)
        fetch(peer, f"fetch at the start after {label}", offset, 200, topic)
    fetch(peer, "fetch below the start", 0, 200, topic)


@pytest.mark.parametrize("scenario", [compacted_topic, delete_records_across_the_gaps], ids=lambda s: s.__name__)
def test_compaction_same_as_kafka(scenario, ebb_peer: Peer, kafka_peer: Peer) -> None:
    unexplained = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not unexplained, "\n".join(unexplained)
