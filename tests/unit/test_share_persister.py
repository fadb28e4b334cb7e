"""StatePersister (broker/share/persister.py) around a share coordinator stand-in: a `__share_group_state`
this broker has not heard of yet (made by another broker) is waited for, not taken as "no state"; the
calls of one request share one deadline, an attempt under way included, and an unreachable
coordinator is asked once per request; the group coordinator's batched asks go to every coordinator at
once, one failing losing none of the others' answers."""

from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace

import pytest

import broker.share.persister as persister_module
from broker.share.persister import PersisterError, StatePersister, request_budget
from broker.share.state_log import SHARE_STATE_TOPIC, ShareState
from protocol.errors import ErrorCode

KEY = ("g", uuid.uuid4(), 0)
STORED = ShareState(0, 1, 7, (), 0)


class _Coordinator:
    """In a cluster, leading the state's partition here; the topic's metadata arrives after `lookups` looks."""

    in_cluster = True

    def __init__(self, lookups: int, leader: int = 0) -> None:
        self.lookups = lookups
        topic = SimpleNamespace(leader=lambda index: leader)
        self.topics = SimpleNamespace(get=self._get, refresh=self._refresh)
        self._topic = topic

    def _get(self, name: str):
        assert name == SHARE_STATE_TOPIC
        self.lookups -= 1
        return self._topic if self.lookups < 0 else None

    async def _refresh(self, name: str):
        return self._topic  # the store has it (made by another broker)

    async def ensure_topic(self) -> None:
        pass  # another broker made it: TOPIC_ALREADY_EXISTS, nothing known here yet

    def partition_of(self, key) -> int:
        return 0

    async def read(self, key, leader_epoch):
        return ErrorCode.NONE, STORED


async def test_a_state_topic_not_yet_known_here_is_waited_for_not_taken_as_no_state():
    coordinator = _Coordinator(lookups=3)
    persister = StatePersister(coordinator, 0, SimpleNamespace())  # type: ignore[arg-type]
    assert await persister.read(KEY, 1) == STORED


class _Silent:
    """Another broker that never answers."""

    def __init__(self) -> None:
        self.asked = 0

    async def request(self, broker_id, request, version):
        self.asked += 1
        await asyncio.Event().wait()


async def test_one_request_over_many_partitions_waits_once_for_an_unreachable_coordinator(monkeypatch):
    monkeypatch.setattr(persister_module, "LATE_ATTEMPT_S", 0.05)
    peers = _Silent()
    persister = StatePersister(_Coordinator(lookups=0, leader=1), 0, peers)  # type: ignore[arg-type]
    began = time.monotonic()
    with request_budget(0.3):
        for index in range(5):
            with pytest.raises(PersisterError) as refused:
                await persister.write(("g", KEY[1], index), 0, 1, 0, ())
            assert refused.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert time.monotonic() - began < 1.0 and peers.asked == 1


async def test_summaries_of_states_coordinated_elsewhere_are_asked_once_per_coordinator():
    """DescribeShareGroupOffsets' way to states on another broker: one ReadShareGroupStateSummary v1 for all
    the keys it coordinates (Kafka's group coordinator batches them alike), each partition's answer as
    (state epoch, leader epoch, start, count); a key whose coordinator loads is asked again alone, one
    refused for good answers its error."""
    from protocol.messages import ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse

    result = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult
    other = uuid.uuid4()
    asked = []

    class _Peers:
        async def request(self, broker_id, request, version):
            asked.append((broker_id, type(request), version,
                          sorted((t.topic_id == KEY[1], p.partition) for t in request.topics for p in t.partitions)))
            loading = len(asked) == 1

            def answer(topic_id, p):
                if topic_id == other:
                    return result.PartitionResult(partition=p, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                  error_message=None, state_epoch=0, leader_epoch=0, start_offset=-1,
                                                  delivery_complete_count=-1)
                code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading and p == 2 else ErrorCode.NONE
                return result.PartitionResult(partition=p, error_code=code, error_message=None, state_epoch=2,
                                              leader_epoch=5, start_offset=9 + p, delivery_complete_count=3)
            return ReadShareGroupStateSummaryResponse(results=[
                result(topic_id=t.topic_id, partitions=[answer(t.topic_id, p.partition) for p in t.partitions])
                for t in request.topics])

    persister = StatePersister(_Coordinator(lookups=0, leader=1), 0, _Peers())  # type: ignore[arg-type]
    keys = [("g", KEY[1], 0), ("g", KEY[1], 1), ("g", KEY[1], 2), ("g", other, 0)]
    assert await persister.summaries(keys) == {
        keys[0]: (2, 5, 9, 3), keys[1]: (2, 5, 10, 3), keys[2]: (2, 5, 11, 3),
        keys[3]: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert asked == [(1, ReadShareGroupStateSummaryRequest, 1, [(False, 0), (True, 0), (True, 1), (True, 2)]),
                     (1, ReadShareGroupStateSummaryRequest, 1, [(True, 2)])]


async def test_a_group_coordinators_initialize_asks_each_coordinator_once_at_start_offset_minus_one():
    """A share group's new share-partitions: one InitializeShareGroupState v0 to each broker coordinating
    some of the keys (the group epoch as state epoch, start offset -1), or the local coordinator; the first
    error."""
    from protocol.messages import InitializeShareGroupStateRequest, InitializeShareGroupStateResponse

    result = InitializeShareGroupStateResponse.InitializeStateResult
    asked = []

    class _Peers:
        async def request(self, broker_id, request, version):
            [topic] = request.topics
            asked.append((broker_id, type(request), version, request.group_id,
                          [(p.partition, p.state_epoch, p.start_offset) for p in topic.partitions]))
            return InitializeShareGroupStateResponse(results=[result(topic_id=topic.topic_id, partitions=[
                result.PartitionResult(partition=p.partition, error_code=ErrorCode.FENCED_STATE_EPOCH
                                       if p.partition == 1 else ErrorCode.NONE, error_message=None)
                for p in topic.partitions])])

    persister = StatePersister(_Coordinator(lookups=0, leader=1), 0, _Peers())  # type: ignore[arg-type]
    assert await persister.initialize("g", 3, {KEY[1]: {0}}) == ErrorCode.NONE
    assert await persister.initialize("g", 3, {KEY[1]: {0, 1, 2}}) == ErrorCode.FENCED_STATE_EPOCH
    assert asked == [(1, InitializeShareGroupStateRequest, 0, "g", [(0, 3, -1)]),
                     (1, InitializeShareGroupStateRequest, 0, "g", [(0, 3, -1), (1, 3, -1), (2, 3, -1)])]

    class _Local(_Coordinator):
        async def initialize(self, key, state_epoch, start_offset):
            asked.append(("local", key, state_epoch, start_offset))
            return ErrorCode.NONE

    asked.clear()
    local = StatePersister(_Local(lookups=0, leader=0), 0, _Peers())  # type: ignore[arg-type]
    assert await local.initialize("g", 2, {KEY[1]: {4}}) == ErrorCode.NONE
    assert asked == [("local", ("g", KEY[1], 4), 2, -1)]


async def test_an_older_ebbs_group_has_only_its_missing_states_initialized():
    """initialize_missing over the local share coordinator: a state an older Ebb's leader wrote stays, as
    does one at a later state epoch (deleted, or initialized by the group coordinator); one never made
    is initialized at state epoch 0 (no start offset: the reset rule's). A state file moved in by a leader
    between the summary and the initialization (at state epoch 1) fences it, and stays."""
    from tests.unit.test_share_coordinator import _coordinator

    coordinator, _ = _coordinator()
    coordinator.active = True  # its partition loaded (empty)
    written, later, missing, moved = (("g", uuid.uuid4(), 0) for _ in range(4))
    coordinator.topics.known.update(key[1] for key in (written, later, missing, moved))  # type: ignore[attr-defined]
    assert await coordinator.initialize(written, 0, 5) == ErrorCode.NONE
    assert await coordinator.write(written, 0, 3, 5, ((5, 6, 2, 1),)) == ErrorCode.NONE
    assert await coordinator.initialize(later, 4, -1) == ErrorCode.NONE
    initialize = coordinator.initialize
    asked = []

    async def a_file_moves_in_first(key, state_epoch, start_offset):
        asked.append((key, state_epoch, start_offset))
        if key == moved and coordinator.states.get(moved) is None:  # the leader's move lands first
            assert await initialize(moved, persister_module.MIGRATED_STATE_EPOCH, 8) == ErrorCode.NONE
            assert await coordinator.write(moved, persister_module.MIGRATED_STATE_EPOCH, 1, 8, ()) == ErrorCode.NONE
        return await initialize(key, state_epoch, start_offset)

    coordinator.initialize = a_file_moves_in_first  # type: ignore[method-assign]
    persister = StatePersister(coordinator, 0, SimpleNamespace())  # type: ignore[arg-type]
    partitions = {key[1]: {0} for key in (written, later, missing, moved)}
    assert await persister.initialize_missing("g", partitions) == ErrorCode.NONE
    states = {key: coordinator.states[key] for key in (written, later, missing, moved)}
    seen = {key: (s.state_epoch, s.leader_epoch, s.start_offset, s.batches) for key, s in states.items()}
    assert seen == {written: (0, 3, 5, ((5, 6, 2, 1),)), later: (4, 0, -1, ()), missing: (0, 0, -1, ()),
                    moved: (1, 1, 8, ())}
    assert {key for key, _, _ in asked} == {missing, moved} and {epoch for _, epoch, _ in asked} == {0}
    asked.clear()  # asked again, all have state: nothing initialized (the one made at 0 looks missing: made again)
    assert await persister.initialize_missing("g", partitions) == ErrorCode.NONE
    assert [key for key, _, _ in asked] == [missing] and coordinator.states[written] == states[written]


async def test_every_coordinator_is_asked_at_once_and_one_failing_loses_no_others_answer(monkeypatch):
    """Summaries over keys coordinated by a broker that never answers, another that does, and this one (one
    of whose keys fails): the silent broker's key is NETWORK_EXCEPTION once the deadline passes, and every
    other key has its answer (asked one after another, the silent broker took the whole deadline first)."""
    from protocol.messages import ReadShareGroupStateSummaryResponse

    monkeypatch.setattr(persister_module, "RETRY_DEADLINE_S", 0.3)
    result = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult
    silent, answering, here, broken = (("g", KEY[1], p) for p in range(4))
    leaders = {0: 1, 1: 2, 2: 0, 3: 0}  # partition -> the broker coordinating it
    asked = []

    class _Peers:
        async def request(self, broker_id, request, version):
            asked.append(broker_id)
            if broker_id == 1:
                await asyncio.Event().wait()
            await asyncio.sleep(0)  # the answer comes over the network
            return ReadShareGroupStateSummaryResponse(results=[result(topic_id=t.topic_id, partitions=[
                result.PartitionResult(partition=p.partition, error_code=ErrorCode.NONE, error_message=None,
                                       state_epoch=1, leader_epoch=2, start_offset=3, delivery_complete_count=0)
                for p in t.partitions]) for t in request.topics])

    class _Spread(_Coordinator):
        def __init__(self) -> None:
            super().__init__(lookups=0)
            self._topic = SimpleNamespace(leader=lambda index: leaders[index])

        def partition_of(self, key) -> int:
            return key[2]

        def summary(self, key):
            if key == broken:
                raise RuntimeError("a bug in the coordinator")
            return ErrorCode.NONE, STORED

    persister = StatePersister(_Spread(), 0, _Peers())  # type: ignore[arg-type]
    assert await persister.summaries([silent, answering, here, broken]) == {
        silent: ErrorCode.NETWORK_EXCEPTION, answering: (1, 2, 3, 0), here: (0, 1, 7, 0),
        broken: ErrorCode.UNKNOWN_SERVER_ERROR}
    assert sorted(set(asked)) == [1, 2]


async def test_a_state_file_moves_in_through_an_initialization_then_a_write():
    """move_in (an older Ebb's state file, taken in by its leader): the share coordinator refuses a write of
    a share-partition without state, so the state is first initialized at the file's start offset under
    the state epoch asked, then written with its batches; a later state epoch stored with a start offset
    refuses it (FENCED_STATE_EPOCH) and nothing is written."""
    from tests.unit.test_share_coordinator import _coordinator

    coordinator, replicas = _coordinator()
    coordinator.active = True
    fresh, newer = ("g", uuid.uuid4(), 0), ("g", uuid.uuid4(), 0)
    coordinator.topics.known.update({fresh[1], newer[1]})  # type: ignore[attr-defined]
    persister = StatePersister(coordinator, 0, SimpleNamespace())  # type: ignore[arg-type]
    await persister.move_in(fresh, 1, 2, 4, ((4, 4, 0, 1), (5, 5, 2, 1)))
    stored = coordinator.states[fresh]
    assert (stored.state_epoch, stored.leader_epoch, stored.start_offset, stored.batches) == (
        1, 2, 4, ((4, 4, 0, 1), (5, 5, 2, 1)))
    assert len(replicas.appended) == 2
    assert await coordinator.initialize(newer, 3, 0) == ErrorCode.NONE  # with a start offset: it fences
    with pytest.raises(PersisterError) as refused:
        await persister.move_in(newer, 1, 2, 4, ())
    assert refused.value.error_code == ErrorCode.FENCED_STATE_EPOCH
    assert coordinator.states[newer].state_epoch == 3 and len(replicas.appended) == 3
