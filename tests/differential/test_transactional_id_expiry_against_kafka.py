"""Apache Kafka 4.3.1 and Ebb expire transactional ids alike (`transactional.id.expiration.ms` of
3 s, checked every 200 ms on both): an Empty id and a committed one go, an open one stays;
afterwards DescribeTransactions, ListTransactions, EndTxn with the old producer id and a new
InitProducerId answer the same. The wait for the expiry is each broker's own (polled, unrecorded);
what is compared is the state after it, which does not depend on timing."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.messages import DescribeTransactionsRequest, InitProducerIdRequest
from tests.broker.data_wire import produce_request
from tests.differential.runner import Peer, compare
from tests.differential.test_transaction_tools_against_kafka import _describe, _list, _txn_batch
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

TOPIC = "expiring"


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"transactional.id.expiration.ms": "3000",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "200"}


def _gone(peer: Peer, transactional_id: str) -> bool:
    [state] = peer.send(DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0).transaction_states
    return state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def expiry(peer: Peer) -> None:
    _create(peer, TOPIC)
    opened = _ready_producer(peer, "exp-open")  # a 60 s transaction timeout: open all along
    peer.ask("add", _add(TOPIC, "exp-open", opened.producer_id, opened.producer_epoch), 3)
    peer.ask("its batch", produce_request(TOPIC, 0, _txn_batch(opened.producer_id, opened.producer_epoch, 0, b"o"),
                                          acks=-1, transactional_id="exp-open"), 9)
    done = _ready_producer(peer, "exp-done")
    peer.ask("add for the committed one", _add(TOPIC, "exp-done", done.producer_id, done.producer_epoch), 3)
    peer.ask("its batch", produce_request(TOPIC, 0, _txn_batch(done.producer_id, done.producer_epoch, 0, b"d"),
                                          acks=-1, transactional_id="exp-done"), 9)
    peer.ask("commit", _end("exp-done", done.producer_id, done.producer_epoch, True), 3)
    _ready_producer(peer, "exp-idle")

    _wait(f"{peer.name}: the committed and the idle ids expire",
          lambda: _gone(peer, "exp-done") and _gone(peer, "exp-idle"), timeout_s=60)
    _describe(peer, "describe after the expiry", "exp-open", "exp-done", "exp-idle")
    _list(peer, "list after the expiry", 0)
    peer.ask("commit again with the expired id's producer", _end("exp-done", done.producer_id, done.producer_epoch,
                                                                 True), 3)
    peer.ask("add with the expired id's producer", _add(TOPIC, "exp-done", done.producer_id, done.producer_epoch), 3)
    peer.ask("init the expired id again",
             InitProducerIdRequest(transactional_id="exp-idle", transaction_timeout_ms=60_000), 4)
    _describe(peer, "describe it", "exp-idle")
    _list(peer, "list at the end", 0)


SCENARIOS = [expiry]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_transactional_ids_expire_as_in_kafka(scenario, ebb_peer, kafka_peer):
    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED, ignore=_ignored)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
