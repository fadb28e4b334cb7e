"""The transaction coordinator's background tasks (markers then Complete, the periodic abort of
timed-out transactions): an unforeseen exception is logged and retried, never a silent end that
leaves a transaction in Prepare*."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import structlog

from broker.replica import AppendResult
from broker.txn import coordinator as coordinator_module
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.state_log import TRANSACTION_STATE_TOPIC, TxnMetadata, TxnState

OK = AppendResult(0, 0, -1, 0)


class FlakyReplicas:
    """Appends succeed, but the first `failures` raise RuntimeError (a bug, not an answered error)."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.appended: list[str] = []

    def endpoint(self, broker_id: int):
        return None

    def partition(self, topic: str, index: int):
        return SimpleNamespace(leader_epoch=0)

    async def append_records(self, batches, **kwargs):
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("unforeseen")
        self.appended += [topic for topic, *_ in batches]
        return [OK for _ in batches]


def coordinator(replicas: FlakyReplicas, interval_ms: int = 10_000) -> TransactionCoordinator:
    config = SimpleNamespace(transactions=SimpleNamespace(abort_timed_out_cleanup_interval_ms=interval_ms,
                                                          state_log_num_partitions=1),
                             node_id=1, inter_broker_security=None)
    topics = SimpleNamespace(get=lambda name: SimpleNamespace(replicas={0: [1]}))
    txns = TransactionCoordinator(config, topics, replicas, in_cluster=False)  # type: ignore[arg-type]
    txns.active = True
    return txns


def owned(txns: TransactionCoordinator, meta: TxnMetadata) -> TxnMetadata:
    """The coordinator completes only the ids it holds."""
    txns._txns[meta.transactional_id] = meta
    return meta


async def wait_for(condition, seconds: float = 5.0) -> None:
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.01)


async def test_a_marker_that_raises_is_logged_and_retried_until_complete(monkeypatch) -> None:
    monkeypatch.setattr(coordinator_module, "MARKER_RETRY_S", 0.01)
    replicas = FlakyReplicas(failures=2)  # the marker, then its retry, raise
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", 7, 0, 60_000, TxnState.PREPARE_COMMIT, {("facts", 0)}, start_ms=1))
    with structlog.testing.capture_logs() as logs:
        txns._spawn(txns._complete(meta, commit=True))
        await wait_for(lambda: meta.state == TxnState.COMPLETE_COMMIT)
    assert replicas.appended == ["facts", TRANSACTION_STATE_TOPIC]
    failures = [e for e in logs if e["event"] == "transaction marker write failed"]
    assert len(failures) == 2 and all(e["log_level"] == "error" for e in failures)
    await txns.stop()


async def test_a_complete_write_that_raises_is_logged_and_retried(monkeypatch) -> None:
    monkeypatch.setattr(coordinator_module, "MARKER_RETRY_S", 0.01)
    replicas = FlakyReplicas(failures=0)
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", 7, 0, 60_000, TxnState.PREPARE_ABORT, set(), start_ms=1))
    replicas.failures = 1  # the Complete write raises once
    with structlog.testing.capture_logs() as logs:
        txns._spawn(txns._complete(meta, commit=False))
        await wait_for(lambda: meta.state == TxnState.COMPLETE_ABORT)
    assert [e["log_level"] for e in logs if e["event"] == "cannot complete transaction yet"] == ["error"]
    await txns.stop()


async def test_the_periodic_abort_survives_an_exception_and_tries_again() -> None:
    txns = coordinator(FlakyReplicas(failures=0), interval_ms=10)
    calls = 0

    async def abort_timed_out(now_ms=None) -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("unforeseen")
        return 0

    txns.abort_timed_out = abort_timed_out  # type: ignore[method-assign]
    with structlog.testing.capture_logs() as logs:
        txns._spawn(txns._abort_timed_out_periodically())
        await wait_for(lambda: calls >= 2)
    assert [e["log_level"] for e in logs if e["event"] == "aborting timed-out transactions failed"] == ["error"]
    await txns.stop()


async def test_a_background_task_that_dies_is_logged() -> None:
    txns = coordinator(FlakyReplicas(failures=0))

    async def broken() -> None:
        raise RuntimeError("unforeseen")

    with structlog.testing.capture_logs() as logs:
        txns._spawn(broken())
        await wait_for(lambda: not txns._tasks)
        await asyncio.sleep(0)
    [failed] = [e for e in logs if e["event"] == "transaction coordinator task failed"]
    assert failed["log_level"] == "error" and "unforeseen" in failed["error"]


async def test_a_completion_stops_when_its_id_is_dropped(monkeypatch) -> None:
    """Leadership of the id's `__transaction_state` partition moved away: the new coordinator completes
    the transaction, this one neither retries markers nor writes the Complete state."""
    monkeypatch.setattr(coordinator_module, "MARKER_RETRY_S", 0.01)
    replicas = FlakyReplicas(failures=1_000_000)  # every marker write fails
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", 7, 0, 60_000, TxnState.PREPARE_COMMIT, {("facts", 0)}, start_ms=1))
    with structlog.testing.capture_logs() as logs:
        task = txns._spawn(txns._complete(meta, commit=True))
        await wait_for(lambda: replicas.failures < 1_000_000 - 2)
        txns._unload_partition(0)
        await asyncio.wait_for(task, 5)
    assert txns.get("tid") is None and meta.state == TxnState.PREPARE_COMMIT
    assert any(e["event"] == "transaction completion handed over" for e in logs)
    await txns.stop()
