"""A share-partition leader's way to its state (Kafka's DefaultStatePersister): read when it starts
leading the share-partition, written after each change, deleted with the group's offsets. The state's
share coordinator is the leader of the key's `__share_group_state` partition (created on first use):
this broker's ShareCoordinator when it leads that partition, else the other broker asked with
ReadShareGroupState / WriteShareGroupState over the inter-broker connections. DescribeShareGroupOffsets
reads a summary (ReadShareGroupStateSummary: no batches, nothing written), and a share group's first
heartbeat over a share-partition has it initialized (InitializeShareGroupState), as Kafka's group coordinator.

While the coordinator moves or loads (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, a connection that fails) the call is retried with a backoff for up to
RETRY_DEADLINE_S, an attempt under way included, then fails with that error: the ShareFetch or
ShareAcknowledge answers it for the partition and the client tries again. Within a request_budget
(ShareFetch, ShareAcknowledge) every call shares one deadline, and a coordinator that could not be
reached is not asked again: a request over many partitions fails within the budget, well under the
client's request timeout, rather than one deadline per partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from broker.share.coordinator import ShareCoordinator
from broker.share.state_log import SHARE_STATE_TOPIC, ShareState, StateBatch, StateKey, delivery_complete_count
from broker.topics import TopicError
from broker.txn.peers import PeerConnections
from protocol.errors import ErrorCode
from protocol.messages import (
    ApiMessage,
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
)

log = structlog.get_logger("share")

RETRY_DEADLINE_S = 10.0
RETRY_BACKOFF_S = 0.05
LATE_ATTEMPT_S = 1.0
_RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION})
_Read = ReadShareGroupStateRequest.ReadStateData
_Write = WriteShareGroupStateRequest.WriteStateData
_Delete = DeleteShareGroupStateRequest.DeleteStateData
_Summary = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
_Initialize = InitializeShareGroupStateRequest.InitializeStateData
_SummaryResult = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult.PartitionResult
_InitializeResult = InitializeShareGroupStateResponse.InitializeStateResult.PartitionResult
# What a summary tells: (state epoch, leader epoch, start offset, delivery-complete count).
Summary = tuple[int, int, int, int]
# The state epoch a group written by an older Ebb (no record 15) has its missing share-partition states
# initialized at, and the one above it an older Ebb's state file moves in at (broker/share/manager.py):
# whichever lands second, the file's state stays.
OLDER_EBB_STATE_EPOCH = 0
MIGRATED_STATE_EPOCH = OLDER_EBB_STATE_EPOCH + 1
_T = TypeVar("_T")  # what one key's answer is read into
_P = TypeVar("_P")  # a partition's result in another broker's answer
# How a share coordinator is asked for some keys (StatePersister._per_coordinator): this broker's one key
# by key (the key's error and value); another broker's one request per group (its partitions of each
# topic id), the request and the version to send it at.
LocalAsk = Callable[[StateKey], Awaitable[tuple[ErrorCode, _T]]]
RemoteAsk = Callable[[str, dict[uuid.UUID, list[int]]], tuple[ApiMessage, int]]


@dataclass
class _Budget:
    deadline: float  # time.monotonic()
    unreachable: dict[int, ErrorCode] = field(default_factory=dict)  # coordinators that failed, and how


_BUDGET: ContextVar[_Budget | None] = ContextVar("share_persister_budget", default=None)


@contextlib.contextmanager
def request_budget(seconds: float = RETRY_DEADLINE_S) -> Iterator[None]:
    """The persister calls made inside (the request's task) share one deadline (see above)."""
    token = _BUDGET.set(_Budget(time.monotonic() + seconds))
    try:
        yield
    finally:
        _BUDGET.reset(token)


class PersisterError(Exception):
    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


class StatePersister:
    def __init__(self, coordinator: ShareCoordinator, node_id: int, peers: PeerConnections) -> None:
        self.coordinator = coordinator
        self.node_id = node_id
        self.peers = peers

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        await self.peers.close()

    async def read(self, key: StateKey, leader_epoch: int) -> ShareState | None:
        """The stored state (None: never any; start offset -1: deleted, with the state epoch a new one
        takes); PersisterError when the coordinator cannot be had."""
        if not await self._topic_exists():
            return None
        return await self._retried(key, lambda leader: self._read_once(leader, key, leader_epoch))

    async def summaries(self, keys: list[StateKey]) -> dict[StateKey, Summary | None | ErrorCode]:
        """Each key's summary (None: never any; an ErrorCode: its coordinator could not be had), asked of
        each share coordinator once for all its keys (one ReadShareGroupStateSummary per other broker, as
        Kafka's group coordinator batches them)."""
        if not keys or not await self._topic_exists():
            return dict.fromkeys(keys)

        def remote(group: str, by_topic: dict[uuid.UUID, list[int]]) -> tuple[ApiMessage, int]:
            return ReadShareGroupStateSummaryRequest(group_id=group, topics=[
                _Summary(topic_id=topic_id, partitions=[_Summary.PartitionData(partition=p, leader_epoch=-1)
                                                        for p in parts])
                for topic_id, parts in by_topic.items()]), 1

        async def local(key: StateKey) -> tuple[ErrorCode, Summary | None]:
            error, state = self.coordinator.summary(key)
            return error, None if state is None else (state.state_epoch, state.leader_epoch, state.start_offset,
                                                      delivery_complete_count(state))

        def result(p: _SummaryResult) -> Summary | None:
            return p.state_epoch, p.leader_epoch, p.start_offset, p.delivery_complete_count
        return await self._per_coordinator(keys, local, remote, result)

    async def initialize(self, group_id: str, state_epoch: int, partitions: dict[uuid.UUID, set[int]]) -> ErrorCode:
        """The group coordinator's ask that these share-partitions' states start (start offset -1: the
        leader's share.auto.offset.reset); the first error met, NONE when all are stored."""
        starts = {(group_id, topic_id, p): -1 for topic_id, parts in sorted(partitions.items()) for p in sorted(parts)}
        errors = await self.initialize_at(state_epoch, starts)
        return next((e for e in errors.values() if e != ErrorCode.NONE), ErrorCode.NONE)

    async def initialize_at(self, state_epoch: int, starts: dict[StateKey, int]) -> dict[StateKey, ErrorCode]:
        """These share-partitions' states start afresh at their start offsets (-1: the leader's
        share.auto.offset.reset) under `state_epoch`, nothing in flight: one InitializeShareGroupState per
        share coordinator and group (as Kafka's persister batches it). Each key's error, NONE once stored."""
        def remote(group: str, by_topic: dict[uuid.UUID, list[int]]) -> tuple[ApiMessage, int]:
            return InitializeShareGroupStateRequest(group_id=group, topics=[
                _Initialize(topic_id=topic_id, partitions=[
                    _Initialize.PartitionData(partition=p, state_epoch=state_epoch,
                                              start_offset=starts[(group, topic_id, p)]) for p in parts])
                for topic_id, parts in by_topic.items()]), 0

        async def local(key: StateKey) -> tuple[ErrorCode, None]:
            return await self.coordinator.initialize(key, state_epoch, starts[key]), None

        def result(p: _InitializeResult) -> None:
            return None
        found = await self._per_coordinator(list(starts), local, remote, result)
        return {key: ErrorCode.NONE if value is None else value for key, value in found.items()}

    async def move_in(self, key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                      batches: tuple[StateBatch, ...]) -> None:
        """An older Ebb's state file taken in by its leader: the state initialized at its start offset under
        `state_epoch`, then its batches written, as a group coordinator and a leader would (no API writes a
        share-partition without state). PersisterError when either fails."""
        errors = await self.initialize_at(state_epoch, {key: start_offset})
        if errors[key] != ErrorCode.NONE:
            raise PersisterError(errors[key])
        await self.write(key, state_epoch, leader_epoch, start_offset, batches)

    async def _per_coordinator(self, keys: list[StateKey], local: LocalAsk[_T], remote: RemoteAsk,
                               result: Callable[[_P], _T]) -> dict[StateKey, _T | ErrorCode]:
        """Each key's `result` of its partition's answer, or the ErrorCode its coordinator gave: every
        coordinator asked at once (`local` per key here, `remote` making one request per group for
        another broker), so that one slow or unreachable coordinator holds back no other's answers; the
        keys whose coordinator moved, loads or could not be reached asked again with the others' until
        RETRY_DEADLINE_S."""
        found: dict[StateKey, _T | ErrorCode] = {}
        pending = list(keys)
        deadline = time.monotonic() + RETRY_DEADLINE_S
        while True:
            errors: dict[StateKey, ErrorCode] = {}
            by_leader: dict[int, list[StateKey]] = {}
            try:
                await self.coordinator.ensure_topic()
                for key in pending:
                    by_leader.setdefault(self._coordinator_of(key), []).append(key)
            except TopicError as exc:
                by_leader, errors = {}, dict.fromkeys(pending, exc.error_code)
            errors.update(dict.fromkeys(by_leader.pop(-1, []), ErrorCode.COORDINATOR_NOT_AVAILABLE))
            answers = await asyncio.gather(*(
                self._ask_local(asked, local) if leader == self.node_id
                else self._ask_many(leader, asked, remote, result, deadline)
                for leader, asked in by_leader.items()))
            for answer in answers:
                for key, value in answer.items():
                    if isinstance(value, ErrorCode):
                        errors[key] = value
                    else:
                        found[key] = value
            pending = [key for key, error in errors.items() if error in _RETRIABLE]
            if not pending or time.monotonic() >= deadline:
                for key, error in errors.items():
                    log.warning("share group state not reached", key=str(key), error=error.name)
                found.update(errors)
                return found
            found.update((key, error) for key, error in errors.items() if error not in _RETRIABLE)
            await asyncio.sleep(RETRY_BACKOFF_S)

    @staticmethod
    async def _ask_local(keys: list[StateKey], local: LocalAsk[_T]) -> dict[StateKey, _T | ErrorCode]:
        """This broker's coordinator, each key at once (a key's own lock orders its writes): each key's
        value, or its error."""
        answers = await asyncio.gather(*(local(key) for key in keys), return_exceptions=True)
        out: dict[StateKey, _T | ErrorCode] = {}
        for key, answer in zip(keys, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, Exception):
                    raise answer  # cancelled: not an answer
                log.error("share coordinator failed", key=str(key), error=repr(answer))
                out[key] = ErrorCode.UNKNOWN_SERVER_ERROR
            else:
                error, value = answer
                out[key] = value if error == ErrorCode.NONE else error
        return out

    async def _ask_many(self, leader: int, keys: list[StateKey], remote: RemoteAsk, result: Callable[[_P], _T],
                        deadline: float) -> dict[StateKey, _T | ErrorCode]:
        """Another broker's coordinator, one request per group: each key's value, or its error
        (NETWORK_EXCEPTION where it could not be asked)."""
        by_group: dict[str, dict[uuid.UUID, list[int]]] = {}
        for group, topic_id, partition in keys:
            by_group.setdefault(group, {}).setdefault(topic_id, []).append(partition)
        out: dict[StateKey, _T | ErrorCode] = dict.fromkeys(keys, ErrorCode.NETWORK_EXCEPTION)
        for group, by_topic in by_group.items():  # a request names one group
            request, version = remote(group, by_topic)
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    answer = await self.peers.request(leader, request, version)
            except Exception as exc:  # unreachable, closed, timed out: asked again
                log.info("cannot ask the share coordinator", broker=leader, error=repr(exc))
                continue
            for topic in answer.results:
                for p in topic.partitions:
                    out[(group, topic.topic_id, p.partition)] = ErrorCode(p.error_code) if p.error_code else result(p)
        return out

    async def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[StateBatch, ...]) -> None:
        await self._retried(key, lambda leader: self._write_once(leader, key, state_epoch, leader_epoch,
                                                                 start_offset, batches))

    async def delete(self, key: StateKey) -> None:
        if await self._topic_exists():
            await self._retried(key, lambda leader: self._delete_once(leader, key))

    async def initialize_missing(self, group_id: str, partitions: dict[uuid.UUID, set[int]]) -> ErrorCode:
        """For a group an older Ebb wrote (its leaders made the states they fetched): those of `partitions`
        without state initialized at OLDER_EBB_STATE_EPOCH, the others left as they are. Without state is
        a summary with no start offset at that state epoch (none, or an older leader's read that wrote
        nothing: the summaries of both look alike). A state file moved in meanwhile fences the
        initialization (FENCED_STATE_EPOCH): asked again, it is no longer missing. The first error, NONE
        once each has state."""
        keys = [(group_id, topic_id, p) for topic_id, parts in sorted(partitions.items()) for p in sorted(parts)]
        error = ErrorCode.NONE
        for _ in range(3):
            missing: dict[uuid.UUID, set[int]] = {}
            for key, summary in (await self.summaries(keys)).items():
                if isinstance(summary, ErrorCode):
                    return summary
                if summary is None or (summary[0] == OLDER_EBB_STATE_EPOCH and summary[2] < 0):
                    missing.setdefault(key[1], set()).add(key[2])
            if not missing:
                return ErrorCode.NONE
            error = await self.initialize(group_id, OLDER_EBB_STATE_EPOCH, missing)
            if error != ErrorCode.FENCED_STATE_EPOCH:
                return error
        return error

    async def _topic_exists(self) -> bool:
        """Whether `__share_group_state` exists: not made for a read or a delete (nothing was ever
        stored), but asked of the cluster's store when this broker has not heard of it: made by another
        broker whose watch has not fired here, "no state" would restart the share-partition from the
        reset rule over the stored state."""
        topics = self.coordinator.topics
        if topics.get(SHARE_STATE_TOPIC) is not None:
            return True
        try:
            return await topics.refresh(SHARE_STATE_TOPIC) is not None
        except Exception as exc:  # the store cannot be read now: the partition's answer, tried again
            log.warning("share group state topic not looked up", error=repr(exc))
            raise PersisterError(ErrorCode.COORDINATOR_NOT_AVAILABLE) from None

    async def _retried(self, key: StateKey, once):
        budget = _BUDGET.get()
        # a call made late in its request (after a ShareFetch's wait) still gets one short try
        deadline = time.monotonic() + (RETRY_DEADLINE_S if budget is None else
                                       max(budget.deadline - time.monotonic(), LATE_ATTEMPT_S))
        while True:
            result, leader = None, -1
            try:
                await self.coordinator.ensure_topic()
                leader = self._coordinator_of(key)
                if leader < 0:
                    error = ErrorCode.COORDINATOR_NOT_AVAILABLE
                elif budget is not None and leader in budget.unreachable:
                    error = budget.unreachable[leader]  # failed already in this request: not asked again
                elif leader == self.node_id:  # bounded by the coordinator's own append timeout; never cut
                    error, result = await once(leader)  # short (its memory must follow its log)
                else:
                    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                        error, result = await once(leader)
            except TopicError as exc:
                error = exc.error_code
            except TimeoutError:  # the deadline passed while the other broker was asked
                error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if error == ErrorCode.NONE:
                return result
            if error not in _RETRIABLE or time.monotonic() >= deadline:
                if budget is not None and leader >= 0 and error in _RETRIABLE:
                    budget.unreachable[leader] = error
                log.warning("share group state not reached", key=str(key), error=error.name)
                raise PersisterError(error)
            await asyncio.sleep(RETRY_BACKOFF_S)

    def _coordinator_of(self, key: StateKey) -> int:
        if not self.coordinator.in_cluster:
            return self.node_id
        topic = self.coordinator.topics.get(SHARE_STATE_TOPIC)
        return -1 if topic is None else topic.leader(self.coordinator.partition_of(key))

    async def _read_once(self, leader: int, key: StateKey, leader_epoch: int) -> tuple[ErrorCode, ShareState | None]:
        if leader == self.node_id:
            return await self.coordinator.read(key, leader_epoch)
        group, topic_id, partition = key
        request = ReadShareGroupStateRequest(group_id=group, topics=[_Read(topic_id=topic_id, partitions=[
            _Read.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
        found = await self._ask(leader, request)
        if found is None:
            return ErrorCode.NETWORK_EXCEPTION, None
        if found.error_code:
            return ErrorCode(found.error_code), None
        return ErrorCode.NONE, ShareState(found.state_epoch, leader_epoch, found.start_offset, tuple(
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in found.state_batches), 0)

    async def _write_once(self, leader: int, key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                          batches: tuple[StateBatch, ...]) -> tuple[ErrorCode, None]:
        if leader == self.node_id:
            return await self.coordinator.write(key, state_epoch, leader_epoch, start_offset, batches), None
        group, topic_id, partition = key
        request = WriteShareGroupStateRequest(group_id=group, topics=[_Write(topic_id=topic_id, partitions=[
            _Write.PartitionData(partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                 start_offset=start_offset, state_batches=[
                                     _Write.PartitionData.StateBatch(first_offset=f, last_offset=la,
                                                                     delivery_state=st, delivery_count=c)
                                     for f, la, st, c in batches])])])
        found = await self._ask(leader, request)
        return (ErrorCode.NETWORK_EXCEPTION if found is None else ErrorCode(found.error_code)), None

    async def _delete_once(self, leader: int, key: StateKey) -> tuple[ErrorCode, None]:
        if leader == self.node_id:
            return await self.coordinator.delete(key), None
        group, topic_id, partition = key
        request = DeleteShareGroupStateRequest(group_id=group, topics=[_Delete(topic_id=topic_id, partitions=[
            _Delete.PartitionData(partition=partition)])])
        found = await self._ask(leader, request)
        return (ErrorCode.NETWORK_EXCEPTION if found is None else ErrorCode(found.error_code)), None

    async def _ask(self, leader: int, request: Any, version: int = 0) -> Any:
        """The one partition's result of the coordinator's answer; None when it could not be asked
        (unreachable, closed, timed out: tried again)."""
        try:
            answer = await self.peers.request(leader, request, version)
        except Exception as exc:
            log.info("cannot ask the share coordinator", broker=leader, error=repr(exc))
            return None
        [found] = [p for r in answer.results for p in r.partitions]
        return found
