"""Record 15's deleting list as Kafka 4.3.1's group coordinator keeps it (broker/group/share_groups.py):
DeleteShareGroupOffsets writes the topics with state as deleting (no longer initialized) before the share
coordinators delete them and takes them off after, a failed deletion left deleting and retried over all
the topic's partitions, topics without state answered UNKNOWN_TOPIC_OR_PARTITION, a group without record
15 answering no topic; DeleteGroups writes every topic with state as deleting, deletes the states, and
only then tombstones the group (kept when a deletion failed); a deleted topic leaves record 15."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.group import share_records
from broker.group.group import GroupError
from broker.group.record_log import record_type
from broker.group.share_groups import OffsetsDeleted, ShareGroups, ShareHeartbeat
from protocol.errors import ErrorCode
from tests.unit.test_consumer_group_records import Log
from tests.unit.test_share_group_state_init import (
    T1,
    TIMEOUTS,
    Coordinators,
    HeldCoordinators,
    _beat,
    _initialized,
    _state_records,
    _topics,
)

T2 = uuid.UUID(int=2)


class Deleter:
    """The share coordinators' deletion: each ask kept with record 15 as written when it came, answered
    `errors` (per topic id, NONE where not named)."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.asked: list[dict[uuid.UUID, tuple[str, frozenset[int]]]] = []
        self.seen: list = []  # the last record 15 written before each ask
        self.errors: dict[uuid.UUID, ErrorCode] = {}

    async def delete(self, group_id: str, topics: dict[uuid.UUID, tuple[str, frozenset[int]]]
                     ) -> dict[uuid.UUID, ErrorCode]:
        assert group_id == "g"
        self.asked.append(dict(topics))
        self.seen.append(_state_records(self.log)[-1])
        return {t: self.errors.get(t, ErrorCode.NONE) for t in topics}


def _groups(log: Log, topics: dict[str, tuple[uuid.UUID, int]], tasks: list[asyncio.Task],
            initialize: bool = True) -> tuple[ShareGroups, Deleter]:
    def spawn(coro):
        tasks.append(task := asyncio.get_running_loop().create_task(coro))
        return task
    groups = ShareGroups(100, topics.get, other_kind=lambda g: False, append=log.append, spawn=spawn)
    if initialize:
        groups.initialize_states = Coordinators().initialize
    deleter = Deleter(log)
    groups.delete_states = deleter.delete
    return groups, deleter


async def _joined_and_left(groups: ShareGroups, topics: list[str]) -> None:
    from broker.group.share_groups import ShareHeartbeat
    from tests.unit.test_share_group_state_init import TIMEOUTS
    await groups.heartbeat(ShareHeartbeat("g", "m1", 0, None, topics, "c", "/h"), TIMEOUTS)
    await _initialized(groups)
    await _beat(groups, "m1", -1)


def test_delete_offsets_lists_the_topic_as_deleting_around_the_deletion():
    log, tasks = Log(), []

    async def run():
        groups, deleter = _groups(log, {"a": (T1, 4), "b": (T2, 2)}, tasks)
        await _joined_and_left(groups, ["a", "b"])
        assert await groups.delete_offsets("g", ["a", "nope"]) == [
            OffsetsDeleted("a", T1, ErrorCode.NONE),
            OffsetsDeleted("nope", None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Topic nope does not exist.")]
        # deleted already: no state of it now
        [again] = await groups.delete_offsets("g", ["a"])
        assert (again.topic_id, again.error) == (T1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        groups.stop()
        return deleter
    deleter = asyncio.run(run())
    assert deleter.asked == [{T1: ("a", frozenset({0, 1, 2, 3}))}]
    [before] = deleter.seen  # written before the share coordinators were asked
    assert _topics(before.initialized_topics) == {T2: ("b", [0, 1])}
    assert [(t.topic_id, t.topic_name) for t in before.deleting_topics] == [(T1, "a")]
    after = _state_records(log)[-1]  # and taken off once deleted; the second delete wrote nothing
    assert after is not None and not after.deleting_topics and _topics(after.initialized_topics) == {T2: ("b", [0, 1])}
    assert len(_state_records(log)) == 4  # initializing, initialized, deleting, deleted


def test_a_failed_deletion_stays_deleting_and_the_next_deletes_every_partition():
    log, tasks = Log(), []

    async def run():
        groups, deleter = _groups(log, {"a": (T1, 4)}, tasks)
        await _joined_and_left(groups, ["a"])
        deleter.errors = {T1: ErrorCode.COORDINATOR_NOT_AVAILABLE}
        assert await groups.delete_offsets("g", ["a"]) == [
            OffsetsDeleted("a", T1, ErrorCode.COORDINATOR_NOT_AVAILABLE)]
        assert [(t.topic_id, t.topic_name) for t in _state_records(log)[-1].deleting_topics] == [(T1, "a")]
        deleter.errors = {}
        assert await groups.delete_offsets("g", ["a"]) == [OffsetsDeleted("a", T1, ErrorCode.NONE)]
        groups.stop()
        return deleter
    deleter = asyncio.run(run())
    assert [asked[T1][1] for asked in deleter.asked] == [frozenset(range(4))] * 2
    assert not _state_records(log)[-1].deleting_topics


def test_delete_offsets_needs_an_empty_group_and_a_group_without_state_answers_no_topic():
    log, tasks = Log(), []

    async def run():
        groups, deleter = _groups(log, {"a": (T1, 4)}, tasks, initialize=False)  # nothing ever initialized
        await _joined_and_left(groups, ["a"])
        assert await groups.delete_offsets("g", ["a"]) == []
        await _beat(groups, "m2", 0)
        with pytest.raises(GroupError) as refused:
            await groups.delete_offsets("g", ["a"])
        assert refused.value.error_code == ErrorCode.NON_EMPTY_GROUP
        with pytest.raises(GroupError) as missing:
            await groups.delete_offsets("other", ["a"])
        assert missing.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        groups.stop()
        return deleter
    assert asyncio.run(run()).asked == [] and _state_records(log) == []


def test_a_deleted_group_deletes_its_states_first_and_stays_when_that_fails():
    log, tasks = Log(), []

    async def run():
        groups, deleter = _groups(log, {"a": (T1, 4), "b": (T2, 2)}, tasks)
        await _joined_and_left(groups, ["a", "b"])
        deleter.errors = {T2: ErrorCode.NOT_COORDINATOR}
        assert await groups.delete("g") == ErrorCode.NOT_COORDINATOR
        assert "g" in groups.groups  # kept, its record 15 listing both as deleting
        deleter.errors = {}
        assert await groups.delete("g") == ErrorCode.NONE
        assert "g" not in groups.groups
        groups.stop()
        return deleter
    deleter = asyncio.run(run())
    everything = {T1: ("a", frozenset(range(4))), T2: ("b", frozenset(range(2)))}
    assert deleter.asked == [everything, everything]
    for seen in deleter.seen:
        assert not seen.initialized_topics and not seen.initializing_topics
        assert sorted((t.topic_id, t.topic_name) for t in seen.deleting_topics) == [(T1, "a"), (T2, "b")]
    kinds = [(record_type(k), v is None) for k, v in log.records]
    deleting = kinds.index((share_records.STATE_PARTITION_METADATA, False), kinds.index((11, False)) + 3)
    assert kinds.index((share_records.STATE_PARTITION_METADATA, True)) > deleting  # tombstones after
    assert _state_records(log)[-1] is None


def test_a_deleted_topic_leaves_record_15():
    log, tasks = Log(), []
    topics = {"a": (T1, 4), "b": (T2, 2)}

    async def run():
        groups, _ = _groups(log, topics, tasks)
        await _joined_and_left(groups, ["a", "b"])
        topics["a"] = (uuid.UUID(int=3), 1)  # deleted and made again: another topic
        groups.topic_deleted("a")
        await asyncio.gather(*tasks)
        groups.stop()
    asyncio.run(run())
    last = _state_records(log)[-1]
    assert last is not None and _topics(last.initialized_topics) == {T2: ("b", [0, 1])}
    assert not last.initializing_topics and not last.deleting_topics


def test_a_topic_deleted_while_its_initialization_is_asked_does_not_come_back():
    """The share coordinators answer an initialization after the topic was deleted and forgotten: the
    answer finds the topic no longer initializing and does not write it back into record 15 for good."""
    log, tasks = Log(), []
    topics = {"a": (T1, 4), "b": (T2, 2)}

    async def run():
        groups, _ = _groups(log, topics, tasks)
        coordinators = HeldCoordinators()
        groups.initialize_states = coordinators.initialize
        await groups.heartbeat(ShareHeartbeat("g", "m1", 0, None, ["a", "b"], "c", "/h"), TIMEOUTS)
        await coordinators.asking.wait()
        del topics["a"]
        groups.topic_deleted("a")
        await tasks[-1]  # the deletion's write (the initialization's task waits before it)
        forgotten = _state_records(log)[-1]  # written by the deletion, before the answer
        assert forgotten is not None and _topics(forgotten.initializing_topics) == {T2: ("b", [0, 1])}
        coordinators.release.set()
        await _initialized(groups)
        groups.stop()
    asyncio.run(run())
    last = _state_records(log)[-1]
    assert last is not None and _topics(last.initialized_topics) == {T2: ("b", [0, 1])}
    assert not last.initializing_topics and not last.deleting_topics
