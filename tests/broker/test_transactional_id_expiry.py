"""`transactional.id.expiration.ms` on a real Ebb process: an id without an open transaction whose
last change is older than the expiration is removed (a tombstone in `__transaction_state`), so
DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND, ListTransactions omits it, and a restart
that replays the topic (after kill -9, with an expiration too long to remove anything again) still does not know it.
An id with an open transaction stays, whatever its age."""

from __future__ import annotations

import signal

import pytest

from protocol.errors import ErrorCode
from protocol.messages import DescribeTransactionsRequest, ListTransactionsRequest
from tests.broker.data_wire import WireClient, create_topic, init_producer_id, produce
from tests.broker.test_transactions import _add_partitions, _end_txn, _txn_batch
from tests.support.polling import wait_for

EXPIRATION_MS = 3000


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"transactional.id.expiration.ms": str(EXPIRATION_MS),
            "transaction.remove.expired.transaction.cleanup.interval.ms": "100"}


def _described(client: WireClient, transactional_id: str):
    [state] = client.request(DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0).transaction_states
    return state


def _listed(client: WireClient) -> dict[str, str]:
    answer = client.request(ListTransactionsRequest(), 0)
    assert answer.error_code == ErrorCode.NONE
    return {s.transactional_id: s.transaction_state for s in answer.transaction_states}


def test_idle_ids_expire_open_ones_stay_and_the_tombstones_replay(broker):
    topic = "expiring"
    with WireClient(broker.port) as client:
        create_topic(client, topic)
        open_ids = init_producer_id(client, transactional_id="stays-open", timeout_ms=600_000)
        assert _add_partitions(client, "stays-open", open_ids, topic) == ErrorCode.NONE
        assert produce(client, topic, 0, _txn_batch(open_ids, 0, b"o"), transactional_id="stays-open").error_code == 0
        committed = init_producer_id(client, transactional_id="committed")
        assert _add_partitions(client, "committed", committed, topic) == ErrorCode.NONE
        assert produce(client, topic, 0, _txn_batch(committed, 0, b"c"), transactional_id="committed").error_code == 0
        assert _end_txn(client, "committed", committed, commit=True) == ErrorCode.NONE
        idle = init_producer_id(client, transactional_id="idle")
        assert _described(client, "idle").error_code == ErrorCode.NONE
        assert _listed(client) == {"stays-open": "Ongoing", "committed": "CompleteCommit", "idle": "Empty"}

        wait_for(lambda: _listed(client) == {"stays-open": "Ongoing"}, timeout_s=EXPIRATION_MS / 1000 + 20,
                 what="the idle and the committed ids expire")
        for gone in ("idle", "committed"):
            assert _described(client, gone).error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert _end_txn(client, "committed", committed, commit=True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert _described(client, "stays-open").transaction_state == "Ongoing"

    # Replayed with an expiration that removes nothing: only the tombstones keep the ids away.
    broker.overrides["transactional.id.expiration.ms"] = str(7 * 24 * 3600 * 1000)
    broker.restart(signal.SIGKILL)
    with WireClient(broker.port) as client:
        assert _listed(client) == {"stays-open": "Ongoing"}
        for gone in ("idle", "committed"):
            assert _described(client, gone).error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        again = init_producer_id(client, transactional_id="idle")  # starts over (Kafka: with a new producer id)
        assert again.producer_id != idle.producer_id and again.producer_epoch == 0
        assert _listed(client) == {"stays-open": "Ongoing", "idle": "Empty"}
