"""Kafka's `kafka-transactions` prints the same lines against Ebb as against Apache Kafka 4.3.1.

On each broker (a fresh Ebb, a fresh KRaft Kafka node from the pinned jars) one transactional id
commits a transaction and another leaves one open (opened over the wire with our codec, so it stays
open while the tool runs); then `list`, `describe --transactional-id` (open, committed, unknown) and
`describe-producers --topic --partition` (the partition both wrote to; for an unknown topic the
admin client itself retries its metadata lookup until its deadline, and what it prints then depends
on its timing, so that is judged at the protocol level in tests/differential). Producer
ids, times and durations are each broker's own and are normalised (by column); the rest of every
line is compared, with the exit code.
"""

from __future__ import annotations

import time

import pytest

from protocol.records import build_batch
from tests.broker.data_wire import list_offsets_request, produce_request
from tests.differential.runner import Peer
from tests.differential.test_transactions_against_kafka import _add, _create, _end, _ready_producer, _wait
from tests.interop.conftest import on_ebb_and_kafka
from tests.interop.test_tools_against_kafka import normalise

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
TOPIC = "tooled"
T0 = int(time.time() * 1000)

SESSION = [
    ("list", ["list"]),
    ("describe the open one", ["describe", "--transactional-id", "tooled-open"]),
    ("describe the committed one", ["describe", "--transactional-id", "tooled-done"]),
    ("describe an unknown id", ["describe", "--transactional-id", "never-was"]),
    ("describe producers", ["describe-producers", "--topic", TOPIC, "--partition", "0"]),
]


def _transactions(peer: Peer) -> None:
    """One committed and one open transaction on partition 0."""
    _create(peer, TOPIC)
    for name, values, commit in (("tooled-done", [b"d0", b"d1"], True), ("tooled-open", [b"o0"], False)):
        ready = _ready_producer(peer, name)
        pid, epoch = ready.producer_id, ready.producer_epoch
        assert peer.send(_add(TOPIC, name, pid, epoch), 3).results_by_topic_v3_and_below[0] \
            .results_by_partition[0].partition_error_code == 0
        batch = build_batch([(None, v, [], T0) for v in values], producer_id=pid, producer_epoch=epoch,
                            base_sequence=0, is_transactional=True)
        reply = peer.send(produce_request(TOPIC, 0, batch, acks=-1, transactional_id=name), 9)
        assert reply.responses[0].partition_responses[0].error_code == 0
        if commit:
            assert peer.send(_end(name, pid, epoch, True), 3).error_code == 0
            _wait(f"{peer.name}: the commit marker", lambda: peer.send(
                list_offsets_request(TOPIC, 0, -1, isolation_level=1), 7).topics[0].partitions[0].offset == 3)


# Columns whose values are each broker's own: its producer ids, its clock, how long ago that was.
OWN_COLUMNS = {"ProducerId", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "LastTimestamp"}


def _columns(lines: list[str]) -> list[str]:
    """A table (a header line, then rows): the broker's own columns replaced, rows sorted (the list
    comes in the coordinator's hash order)."""
    if not lines or "TransactionalId" not in lines[0] and "ProducerId" not in lines[0]:
        return lines
    header = lines[0].split()
    rows = [" ".join(f"<{name}>" if name in OWN_COLUMNS else value
                     for name, value in zip(header, line.split(), strict=False)) for line in lines[1:]]
    return [lines[0], *sorted(rows)]


def play(java, port: int, bootstrap: str) -> dict[str, tuple[int, list[str]]]:
    peer = Peer("broker", port)
    try:
        _transactions(peer)
    finally:
        peer.close()
    answers = {}
    for label, args in SESSION:
        run = java.tool(bootstrap, TRANSACTIONS, *args)
        answers[label] = (run.returncode, _columns(normalise(run.stdout + run.stderr, bootstrap)))
    return answers


@pytest.fixture(scope="module")
def sessions(java, tmp_path_factory) -> tuple[dict, dict]:
    return on_ebb_and_kafka(tmp_path_factory, lambda server, _: play(java, server.port, server.bootstrap))


@pytest.mark.parametrize("label", [label for label, _ in SESSION])
def test_kafka_transactions_prints_what_it_prints_against_kafka(sessions, label):
    ours, theirs = (side[label] for side in sessions)
    assert ours == theirs, f"{label}:\nEbb:   {ours}\nKafka: {theirs}"
