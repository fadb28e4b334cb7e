"""The transaction coordinator's background tasks (markers then Complete, the periodic abort of
timed-out transactions): an unforeseen exception is logged and retried, never a silent end that
leaves a transaction in Prepare*."""

from __future__ import annotations

import asyncio
import uuid

import structlog

from broker.cluster.partition_state import PartitionState
from broker.config import load_config
from broker.log import TopicPartition
from broker.replica import AppendResult, PartitionError
from broker.topic import Topic
from broker.txn import completion as completion_module
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.state_log import TRANSACTION_STATE_TOPIC, TxnMetadata, TxnState
from protocol.errors import ErrorCode
from tests.support.polling import until
from tests.unit.fakes import FakeReplica, TopicsOf

OK = AppendResult(0, 0, -1, 0)


class FlakyReplicas:
    """Appends succeed, but the first `failures` raise RuntimeError (a bug, not an answered error)."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.appended: list[str] = []

    def endpoint(self, broker_id: int):
        return None

    def partition(self, topic: str, index: int) -> FakeReplica:
        return FakeReplica(TopicPartition(topic, index), leader_epoch=0)

    async def append_records(self, batches, **kwargs):
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("unforeseen")
        self.appended += [topic for topic, *_ in batches]
        return [OK for _ in batches]


def led_here(name: str) -> Topic:
    """One partition, on broker 1 alone, which leads it."""
    return Topic(name, uuid.uuid4(), {0: [1]}, states={0: PartitionState(1, 4, (1,), 1)})


def coordinator(replicas: FlakyReplicas, interval_ms: int = 10_000, *, in_cluster: bool = False,
                verification: bool = True) -> TransactionCoordinator:
    config = load_config(None, [
        "node.id=1", f"transaction.abort.timed.out.transaction.cleanup.interval.ms={interval_ms}",
        "transactional.id.expiration.ms=1000", "transaction.state.log.num.partitions=1",
        f"transaction.partition.verification.enable={str(verification).lower()}"])
    topics = TopicsOf(led_here("facts"), led_here(TRANSACTION_STATE_TOPIC))
    # ReplicaManager is not narrowed to a Protocol yet (the coordinator replays the Partitions it
    # returns): FlakyReplicas has what these tests reach of it
    txns = TransactionCoordinator(config, topics, replicas, in_cluster=in_cluster)  # type: ignore[arg-type]
    txns.active = True
    return txns


def owned(txns: TransactionCoordinator, meta: TxnMetadata) -> TxnMetadata:
    """The coordinator completes only the ids it holds."""
    txns._txns[meta.transactional_id] = meta
    return meta


async def wait_for(condition, seconds: float = 5.0) -> None:
    await until(condition, timeout_s=seconds)


async def test_a_marker_that_raises_is_logged_and_retried_until_complete(monkeypatch) -> None:
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = FlakyReplicas(failures=2)  # the marker, then its retry, raise
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", 7, 0, 60_000, TxnState.PREPARE_COMMIT, {("facts", 0)}, start_ms=1))
    with structlog.testing.capture_logs() as logs:
        txns._spawn(txns._completions.complete(meta, commit=True))
        await wait_for(lambda: meta.state == TxnState.COMPLETE_COMMIT)
    assert replicas.appended == ["facts", TRANSACTION_STATE_TOPIC]
    failures = [e for e in logs if e["event"] == "transaction marker write failed"]
    assert len(failures) == 2 and all(e["log_level"] == "error" for e in failures)
    await txns.stop()


async def test_a_complete_write_that_raises_is_logged_and_retried(monkeypatch) -> None:
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = FlakyReplicas(failures=0)
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", 7, 0, 60_000, TxnState.PREPARE_ABORT, set(), start_ms=1))
    replicas.failures = 1  # the Complete write raises once
    with structlog.testing.capture_logs() as logs:
        txns._spawn(txns._completions.complete(meta, commit=False))
        await wait_for(lambda: meta.state == TxnState.COMPLETE_ABORT)
    assert [e["log_level"] for e in logs if e["event"] == "cannot complete transaction yet"] == ["error"]
    await txns.stop()


async def test_the_periodic_abort_survives_an_exception_and_tries_again(monkeypatch) -> None:
    txns = coordinator(FlakyReplicas(failures=0), interval_ms=10)
    calls = 0

    async def abort_timed_out(now_ms=None) -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("unforeseen")
        return 0

    monkeypatch.setattr(txns, "abort_timed_out", abort_timed_out)
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
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = FlakyReplicas(failures=1_000_000)  # every marker write fails
    txns = coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", 7, 0, 60_000, TxnState.PREPARE_COMMIT, {("facts", 0)}, start_ms=1))
    with structlog.testing.capture_logs() as logs:
        task = txns._spawn(txns._completions.complete(meta, commit=True))
        await wait_for(lambda: replicas.failures < 1_000_000 - 2)
        txns._unload_partition(0)
        await asyncio.wait_for(task, 5)
    assert txns.get("tid") is None and meta.state == TxnState.PREPARE_COMMIT
    assert any(e["event"] == "transaction completion handed over" for e in logs)
    await txns.stop()


async def test_expired_ids_stay_while_their_tombstones_are_not_written() -> None:
    """The tombstone first: an append that fails (or raises) leaves the id known, and a later round
    removes it; an id with an open transaction or a recent change is never removed."""
    replicas = FlakyReplicas(failures=1)
    txns = coordinator(replicas)
    idle = owned(txns, TxnMetadata("idle", 7, 0, 60_000, TxnState.COMPLETE_ABORT, update_ms=1_000))
    owned(txns, TxnMetadata("open", 8, 0, 60_000, TxnState.ONGOING, {("facts", 0)}, start_ms=1, update_ms=1_000))
    owned(txns, TxnMetadata("recent", 9, 0, 60_000, TxnState.EMPTY, update_ms=2_500))
    try:
        await txns.remove_expired(now_ms=3_000)
    except RuntimeError:
        pass
    assert txns.get("idle") is idle and not idle.pending
    assert await txns.remove_expired(now_ms=3_000) == 1
    assert replicas.appended == [TRANSACTION_STATE_TOPIC]
    assert sorted(m.transactional_id for m in txns.all()) == ["open", "recent"]
    await txns.stop()


def test_partition_verification_can_be_turned_off() -> None:
    """`transaction.partition.verification.enable=false`: leaders write transactional batches (Produce
    below v12, TxnOffsetCommit below v5) without asking the coordinator (Kafka's behaviour with the check
    off), so a transaction can hang; a producer on transactions version 2 still has its partitions added."""
    assert coordinator(FlakyReplicas(failures=0)).verifies(adds=False)
    off = coordinator(FlakyReplicas(failures=0), verification=False)
    assert not off.verifies(adds=False) and off.verifies(adds=True)


class ClusterReplicas(FlakyReplicas):
    """A cluster member leading partition 0 of `__transaction_state` until its replica is dropped."""

    def __init__(self, failures: int) -> None:
        super().__init__(failures)
        self.hosted = True
        self.epochs: list[int] = []

    def partition(self, topic: str, index: int) -> FakeReplica:
        if not self.hosted:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "no replica here")
        return FakeReplica(TopicPartition(topic, index), leader_epoch=4)


def cluster_coordinator(replicas: ClusterReplicas) -> TransactionCoordinator:
    txns = coordinator(replicas, in_cluster=True)
    txns.partitions.loaded.add(0)  # led and loaded here
    return txns


async def test_a_forgotten_partition_is_unloaded_and_its_completions_stop(monkeypatch) -> None:
    """The replica of the id's `__transaction_state` partition is dropped here (reassigned away, its
    log dir failed): ReplicaManager tells its forget listeners, the ids are unloaded, and the
    completion stops rather than sending markers forever."""
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = ClusterReplicas(failures=1_000_000)  # every marker write fails
    txns = cluster_coordinator(replicas)
    meta = owned(txns, TxnMetadata("tid", 7, 0, 60_000, TxnState.PREPARE_COMMIT, {("facts", 0)}, start_ms=1))
    task = txns._spawn(txns._completions.complete(meta, commit=True))
    await wait_for(lambda: replicas.failures < 1_000_000 - 2)
    replicas.hosted = False
    txns.partitions.forgotten(TopicPartition(TRANSACTION_STATE_TOPIC, 0))
    await asyncio.wait_for(task, 5)
    assert txns.get("tid") is None and not txns.partitions.loaded
    await txns.stop()


async def test_a_completion_stops_once_its_partition_is_not_served_here(monkeypatch) -> None:
    """Even before (or without) an unload: an id whose partition this broker no longer leads is not
    completed here, and no marker goes out under a made-up coordinator epoch."""
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = ClusterReplicas(failures=1_000_000)
    txns = cluster_coordinator(replicas)
    rounds: list[int] = []
    real_round = txns._sender.send_round

    async def send_round(producer_id, producer_epoch, commit, coordinator_epoch, partitions, transaction_version=0):
        rounds.append(coordinator_epoch)
        return await real_round(producer_id, producer_epoch, commit, coordinator_epoch, partitions,
                                transaction_version)

    monkeypatch.setattr(txns._sender, "send_round", send_round)
    meta = owned(txns, TxnMetadata("tid", 7, 0, 60_000, TxnState.PREPARE_COMMIT, {("facts", 0)}, start_ms=1))
    task = txns._spawn(txns._completions.complete(meta, commit=True))
    await wait_for(lambda: len(rounds) >= 2)
    replicas.hosted = False  # the replica is gone, the listeners not told (yet)
    await asyncio.wait_for(task, 5)
    assert set(rounds) == {4}
    await txns.stop()


async def test_no_marker_round_without_a_coordinator_epoch(monkeypatch) -> None:
    monkeypatch.setattr(completion_module, "MARKER_RETRY_S", 0.01)
    replicas = FlakyReplicas(failures=0)
    txns = coordinator(replicas)
    epoch = -1
    monkeypatch.setattr(txns.partitions, "leader_epoch", lambda index: epoch)
    meta = owned(txns, TxnMetadata("tid", 7, 0, 60_000, TxnState.PREPARE_COMMIT, {("facts", 0)}, start_ms=1))
    txns._spawn(txns._completions.complete(meta, commit=True))
    await asyncio.sleep(0.05)
    assert replicas.appended == [] and meta.state == TxnState.PREPARE_COMMIT
    epoch = 2
    await wait_for(lambda: meta.state == TxnState.COMPLETE_COMMIT)
    assert replicas.appended == ["facts", TRANSACTION_STATE_TOPIC]
    await txns.stop()
