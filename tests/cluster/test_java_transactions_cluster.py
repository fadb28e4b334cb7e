"""Kafka's Java transactional producer and Kafka Streams exactly_once_v2 against three Ebb brokers on
ZooKeeper, every topic (the suites' own, Streams' internal ones and `__transaction_state`) replicated
three ways: transaction coordinators are the leaders of `__transaction_state` partitions, and their
markers reach partitions led elsewhere by WriteTxnMarkers.

The same checks as tests/interop/test_transactions.py (commits and aborts read back by
read_committed and read_uncommitted consumers, fencing by a second instance, offsets sent to a
transaction) and tests/interop/test_streams_eos.py (the word count's exact counts, its repartition
topic purged under transactions). One JVM runs the `transactions` and `streams_eos` suites.
"""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.three_brokers import three_brokers
from tests.interop.conftest import java  # noqa: F401 - the fixture that builds and runs the Java checks
from tests.interop.test_streams_eos import (  # noqa: F401
    PREFIX,
    test_exact_counts_after_a_repartition,
    test_streams_closes_cleanly,
    test_the_repartition_topic_is_purged_under_transactions,
)
from tests.interop.test_transactions import (  # noqa: F401
    test_a_second_instance_fences_the_first,
    test_offsets_sent_to_a_transaction_count_only_when_it_commits,
    test_read_committed_sees_the_commits_and_never_the_abort,
)

pytestmark = pytest.mark.timeout(600)

TRANSACTION_STATE = {"transaction.state.log.replication.factor": "3", "transaction.state.log.num.partitions": "3",
                     "transaction.state.log.min.isr": "2"}


@pytest.fixture(scope="module")
def steps(java, zk_server, tmp_path_factory):  # noqa: F811 - `java` is the imported fixture
    connect = f"{zk_server.connect}/java-txn-{uuid.uuid4().hex[:12]}"
    with three_brokers(connect, tmp_path_factory.mktemp("java-txn-cluster"), extra=TRANSACTION_STATE) as brokers:
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        return java.interop(bootstrap, PREFIX, "transactions", "streams_eos", replication=3)
