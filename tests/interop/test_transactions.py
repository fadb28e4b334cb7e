"""KafkaProducer's transactional API (kafka-clients 4.3.1) against Ebb: initTransactions, commits and
aborts, read back by KafkaConsumers with isolation.level read_committed (no aborted record) and
read_uncommitted (everything); a second instance with the same transactional.id fences the first
mid-transaction, whose commit then fails and whose records stay hidden; sendOffsetsToTransaction's
offsets count once the transaction commits and not after an abort. Ebb finalizes transaction.version=2,
so the producer runs transactions version 2 (KIP-890 part 2: EndTxn v5, Produce v12 and
TxnOffsetCommit v5 adding partitions implicitly), as against Kafka 4.3.1. One JVM runs the
`transactions` suite of ebb.interop.TransactionChecks."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def steps(java, broker):
    return java.interop(broker.bootstrap, "txn", "transactions")


def test_read_committed_sees_the_commits_and_never_the_abort(steps):
    assert steps.ok("txn_commit_abort") == {
        "step": "txn_commit_abort", "transaction_v2": True, "read_committed": 15, "aborted_seen": 0,
        "read_uncommitted": 25}


def test_a_second_instance_fences_the_first(steps):
    answer = steps.ok("txn_fencing")
    assert answer["zombie_commit"] == "ProducerFencedException"
    assert answer["read_committed"] == ["survivor-0"]


def test_offsets_sent_to_a_transaction_count_only_when_it_commits(steps):
    assert steps.ok("txn_offsets") == {"step": "txn_offsets", "after_commit": 7, "after_abort": 7}
