"""A cluster kept at transaction.version=1 (`ebb.transaction.version=1`, what `kafka-features
downgrade --feature transaction.version=1` leaves on Kafka): ApiVersions finalizes level 1, so Kafka
4.3.1's Java producer stays on transactions version 1 (AddPartitionsToTxn, EndTxn v4, Produce v11)
and its commits, aborts, fencing and sendOffsetsToTransaction hold as with version 2
(tests/interop/test_transactions.py); `kafka-features describe` prints the level."""

from __future__ import annotations

import pytest

# the same checks, run here against this module's broker (at level 1)
from tests.interop.test_transactions import (  # noqa: F401
    test_a_second_instance_fences_the_first,
    test_offsets_sent_to_a_transaction_count_only_when_it_commits,
)

BROKER_OVERRIDES = {"ebb.transaction.version": "1"}
FEATURES = "org.apache.kafka.tools.FeatureCommand"


@pytest.fixture(scope="module")
def steps(java, broker):
    return java.interop(broker.bootstrap, "txn1", "transactions")


def test_the_producer_stays_on_version_1_and_read_committed_holds(steps):
    answer = steps.ok("txn_commit_abort")
    assert answer["transaction_v2"] is False
    assert (answer["read_committed"], answer["aborted_seen"], answer["read_uncommitted"]) == (15, 0, 25)


def test_kafka_features_describes_level_1(java, broker):
    run = java.tool(broker.bootstrap, FEATURES, "describe")
    assert run.returncode == 0, run.stderr[-2000:]
    [line] = [" ".join(line.split()) for line in run.stdout.splitlines() if "transaction.version" in line]
    assert line.startswith("Feature: transaction.version SupportedMinVersion: 0 SupportedMaxVersion: 2 "
                           "FinalizedVersionLevel: 1 Epoch: "), line
