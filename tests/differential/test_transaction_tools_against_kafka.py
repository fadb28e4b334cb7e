"""Apache Kafka 4.3.1 and Ebb answer the APIs of `kafka-transactions` the same way: ListTransactions
(v0-2, every filter, unknown state names, a pattern that does not compile), DescribeTransactions
(open, completed, unknown and empty ids, before the coordinator owns anything) and DescribeProducers
(open and committed producers, unknown topics and partitions, illegal names).

Producer ids are each broker's own (ignored); start times and markers' timestamps are each
coordinator's clock, compared as "recent" or as they are."""

from __future__ import annotations

import time

import pytest

from protocol.messages import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from protocol.records import build_batch
from tests.broker.data_wire import list_offsets_request, produce_request
from tests.differential.runner import Peer, compare
from tests.differential.test_transactions_against_kafka import (
    ALLOWED,
    _add,
    _create,
    _end,
    _ignored,
    _ready_producer,
    _wait,
)

pytestmark = pytest.mark.timeout(300)

T0 = int(time.time() * 1000)
TOPIC = "tools"


def _recent(ms: int) -> int | str:
    return "<recent>" if abs(time.time() * 1000 - ms) < 600_000 else ms


def _list(peer: Peer, label: str, version: int, **filters) -> None:
    answer = peer.send(ListTransactionsRequest(**filters), version)
    answer.transaction_states.sort(key=lambda s: s.transactional_id)  # Kafka lists them in hash order
    peer.record(label, answer)


def _describe(peer: Peer, label: str, *ids: str) -> None:
    answer = peer.send(DescribeTransactionsRequest(transactional_ids=list(ids)), 0)
    for state in answer.transaction_states:
        state.transaction_start_time_ms = _recent(state.transaction_start_time_ms)
    peer.record(label, answer)


def _producers(peer: Peer, label: str, *asked: tuple[str, list[int]]) -> None:
    answer = peer.send(DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=name, partition_indexes=indexes) for name, indexes in asked]), 0)
    for topic in answer.topics:
        for partition in topic.partitions:
            partition.active_producers.sort(key=lambda p: (p.current_txn_start_offset, p.last_sequence))
            for producer in partition.active_producers:  # a marker's time is its coordinator's clock
                producer.last_timestamp = "<the batch's>" if producer.last_timestamp == T0 else \
                    _recent(producer.last_timestamp)
    peer.record(label, answer)


def _txn_batch(producer_id: int, epoch: int, sequence: int, *values: bytes) -> bytes:
    return build_batch([(None, v, [], T0) for v in values], producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=sequence, is_transactional=True)


def _settled(peer: Peer, transactional_id: str, state: str, last_stable_offset: int) -> bool:
    """The marker is in the partition (its last stable offset moved) and the coordinator has written
    the transaction's Complete state, which comes after the marker: answers in between are timing."""
    lso = peer.send(list_offsets_request(TOPIC, 0, -1, isolation_level=1), 7).topics[0].partitions[0].offset
    [described] = peer.send(DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0).transaction_states
    return lso == last_stable_offset and described.transaction_state == state


def transaction_tools(peer: Peer) -> None:
    _describe(peer, "describe before any transaction", "nobody")
    _list(peer, "list before any transaction", 0)
    _create(peer, TOPIC)
    done = _ready_producer(peer, "tools-done")
    _describe(peer, "describe a new id: Empty", "tools-done")
    peer.ask("add for the committed one", _add(TOPIC, "tools-done", done.producer_id, done.producer_epoch), 3)
    peer.ask("its batch", produce_request(TOPIC, 0, _txn_batch(done.producer_id, done.producer_epoch, 0, b"d0", b"d1"),
                                          acks=-1, transactional_id="tools-done"), 9)
    peer.ask("commit", _end("tools-done", done.producer_id, done.producer_epoch, True), 3)
    _wait(f"{peer.name}: the commit completes", lambda: _settled(peer, "tools-done", "CompleteCommit", 3))
    opened = _ready_producer(peer, "tools-open")
    peer.ask("add for the open one", _add(TOPIC, "tools-open", opened.producer_id, opened.producer_epoch), 3)
    peer.ask("its batch", produce_request(TOPIC, 0, _txn_batch(opened.producer_id, opened.producer_epoch, 0, b"o0"),
                                          acks=-1, transactional_id="tools-open"), 9)
    time.sleep(0.05)  # the duration filter counts whole milliseconds since the start

    for version in (0, 1, 2):
        _list(peer, f"list v{version}", version)
    _list(peer, "list Ongoing", 0, state_filters=["Ongoing"])
    _list(peer, "list CompleteCommit and Empty", 0, state_filters=["CompleteCommit", "Empty"])
    _list(peer, "list with unknown and miscased states", 0, state_filters=["Ongoing", "Bogus", "ongoing", "Bogus"])
    _list(peer, "list by producer id", 0, producer_id_filters=[opened.producer_id])
    _list(peer, "list by an unknown producer id", 0, producer_id_filters=[-5])
    _list(peer, "list open for more than 0 ms", 1, duration_filter=0)
    _list(peer, "list open for more than an hour", 1, duration_filter=3_600_000)
    _list(peer, "list by a pattern", 2, transactional_id_pattern="tools-o.*")
    _list(peer, "list by a pattern matching only a prefix", 2, transactional_id_pattern="tools")
    _list(peer, "list by an empty pattern", 2, transactional_id_pattern="")
    _list(peer, "list by a pattern and a state", 2, transactional_id_pattern="tools-.*", state_filters=["Ongoing"])
    _list(peer, "list by a pattern that does not compile", 2, transactional_id_pattern="tools-(")

    _describe(peer, "describe open, committed, unknown and empty ids", "tools-open", "tools-done", "nobody", "")
    _describe(peer, "describe nothing")

    _producers(peer, "producers of the partition", (TOPIC, [0]))
    _producers(peer, "producers: unknown partition, listed twice", (TOPIC, [1, 0, 1]))
    _producers(peer, "producers: unknown topic", ("no-such-topic", [0]))
    _producers(peer, "producers: illegal and empty names", ("bad name!", [0]), ("", [0, 1]))
    _producers(peer, "producers: no partitions asked", (TOPIC, []))

    peer.ask("abort the open one", _end("tools-open", opened.producer_id, opened.producer_epoch, False), 3)
    _wait(f"{peer.name}: the abort completes", lambda: _settled(peer, "tools-open", "CompleteAbort", 5))
    _list(peer, "list after the abort", 1)
    _describe(peer, "describe after the abort", "tools-open")
    _producers(peer, "producers after the abort", (TOPIC, [0]))


SCENARIOS = [transaction_tools]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_same_transaction_tool_answers_as_kafka(scenario, ebb_peer, kafka_peer):
    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED, ignore=_ignored)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
