"""CoordinatorPartitions (the `__transaction_state` / `__consumer_offsets` partitions a broker
coordinates) with fakes: a partition is served only once its load succeeded."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker import coordinator_partitions as module
from broker.coordinator_partitions import CoordinatorPartitions
from broker.log import TopicPartition
from broker.replica import Partition
from broker.topic import Topic
from protocol.errors import ErrorCode
from tests.unit.fakes import FakeReplica
from tests.unit.leading_broker import LEADER, leading_broker

TOPIC = "__transaction_state"


def _partition(index: int, *, leader: bool = True) -> FakeReplica:
    return FakeReplica(TopicPartition(TOPIC, index), leader)


async def _settled(partitions: CoordinatorPartitions) -> None:
    async with asyncio.timeout(5):
        while partitions.loading:
            await asyncio.sleep(0.01)


@pytest.fixture
def fast_retry(monkeypatch):
    monkeypatch.setattr(module, "LOAD_RETRY_S", 0.01)


async def test_a_failed_load_is_never_served_and_is_retried_from_nothing(fast_retry) -> None:
    """The load raises twice after replaying part of the partition: meanwhile the partition answers
    COORDINATOR_LOAD_IN_PROGRESS (not served empty or half-loaded), the partial state is dropped,
    and the third load serves it."""
    replica = _partition(0)
    state: dict[str, int] = {}
    attempts = 0
    may_succeed = asyncio.Event()

    async def load(index: int, partition: FakeReplica) -> None:
        nonlocal attempts
        attempts += 1
        state[f"partial-{attempts}"] = index
        if attempts < 3:
            raise OSError("read failed")
        await may_succeed.wait()
        state["complete"] = index

    partitions = CoordinatorPartitions(TOPIC, asyncio.get_running_loop().create_task, lambda index: replica,
                                       load=load, unload=lambda index: state.clear())
    partitions.moved(replica)
    async with asyncio.timeout(5):
        while attempts < 3:
            await asyncio.sleep(0.01)
    assert partitions.not_served(0) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert state == {"partial-3": 0}  # the failed attempts' state is gone
    may_succeed.set()
    await _settled(partitions)
    assert partitions.not_served(0) is None and partitions.loaded == {0}
    assert state == {"partial-3": 0, "complete": 0}


async def test_a_leader_never_loaded_is_not_served() -> None:
    """A replica that leads but whose load never ran (or was dropped) is NOT_COORDINATOR."""
    replica = _partition(0)

    async def load(index: int, partition: FakeReplica) -> None:
        pass

    partitions = CoordinatorPartitions(TOPIC, asyncio.get_running_loop().create_task, lambda index: replica,
                                       load=load, unload=lambda index: None)
    assert partitions.not_served(0) == ErrorCode.NOT_COORDINATOR
    partitions.moved(replica)
    await _settled(partitions)
    assert partitions.not_served(0) is None
    replica.is_leader = False
    partitions.moved(replica)
    assert partitions.not_served(0) == ErrorCode.NOT_COORDINATOR and not partitions.loaded


async def test_a_replica_dropped_by_the_replica_manager_is_unloaded(tmp_path) -> None:
    """ReplicaManager forgets a replica (here: its topic deleted; also reassigned away, log dir failed,
    log replaced) and tells its forget listeners: the coordinator drops the partition's state."""
    unloaded: list[int] = []

    async def load(index: int, partition: Partition) -> None:
        pass

    async with leading_broker(tmp_path, Topic(TOPIC, uuid.uuid4(), {0: [LEADER]})) as broker:
        replicas = broker.replicas
        partitions = CoordinatorPartitions(TOPIC, asyncio.get_running_loop().create_task,
                                           lambda index: replicas.partition(TOPIC, index), load=load,
                                           unload=unloaded.append)
        partitions.moved(replicas.partition(TOPIC, 0))
        await _settled(partitions)
        assert partitions.not_served(0) is None
        replicas.forget_listeners.append(partitions.forgotten)
        unloaded.clear()
        replicas.forget_topic(TOPIC)
        assert unloaded == [0] and not partitions.loaded
        assert partitions.not_served(0) == ErrorCode.NOT_COORDINATOR
