"""KIP-848 consumer group records of __consumer_offsets (broker/group/consumer_records.py): their bytes
as Kafka's specs lay them out, the writes a heartbeat makes (only what changed; tombstones when a
member or the group goes; a failed append is the heartbeat's error and its change undone), and a
coordinator rebuilding the groups from the records it replays."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from broker.group import consumer_records, record_log, share_records
from broker.group.consumer_group import MemberState
from broker.group.consumer_groups import ConsumerGroups, ConsumerHeartbeat
from broker.group.consumer_type_changes import ClassicIds
from broker.group.group import GroupError
from broker.group.record_log import record_type
from broker.group.requests import MemberCheck
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode

T1 = uuid.UUID(int=1)
TIMEOUTS = MemberTimeouts(45000, 5000, 0)


class Log:
    """__consumer_offsets as a list of (key, value) records, failing when told to."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.fail: ErrorCode | None = None
        self.attempts: list[bool] = []  # each append: whether it was let through
        self.tried = asyncio.Event()  # set at each append

    async def append(self, group_id: str, entries) -> int:
        self.attempts.append(self.fail is None)
        self.tried.set()
        if self.fail is not None:
            raise GroupError(self.fail, "append failed")
        self.records.extend(entries)
        return len(self.records) - len(entries)


async def session_left_after_load(load, member_of) -> float:
    """`load(group_session_ms)` rebuilds the groups with group "g" configured at a 2 s session; the
    seconds left on `member_of()`'s session once re-armed by it (the broker's 45 s until then)."""
    asked = asyncio.Event()

    async def group_session_ms(group_id: str) -> int:
        asked.set()
        return 2_000 if group_id == "g" else 45_000

    load(group_session_ms)
    await asyncio.wait_for(asked.wait(), 10)
    for _ in range(3):  # the re-arm right after the read
        await asyncio.sleep(0)
    timer = member_of().session_timer
    assert timer is not None
    return timer.when() - asyncio.get_running_loop().time()


def _groups(log: Log, partitions: int = 4, topics: dict | None = None, **kw) -> ConsumerGroups:
    topics = {"a": (T1, partitions)} if topics is None else topics
    return ConsumerGroups(100, ["uniform", "range"], lambda: topics,
                          ClassicIds(lambda g: False, lambda g: False, lambda g: None), is_share=lambda g: False,
                          append=log.append, spawn=lambda coro: asyncio.get_running_loop().create_task(coro), **kw)


def _hb(member: str, epoch: int, owned=None, **kw) -> ConsumerHeartbeat:
    fields = dict(group_id="g", member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                  rebalance_timeout_ms=30000 if epoch == 0 else -1, subscribed=["a"] if epoch == 0 else None,
                  regex=None, server_assignor=None, owned={} if epoch == 0 else owned, client_id="c",
                  client_host="/h")
    fields.update(kw)
    return ConsumerHeartbeat(**fields)


async def _beat(groups: ConsumerGroups, request: ConsumerHeartbeat):
    answer = groups.heartbeat(request, TIMEOUTS)
    await groups.persist(request.group_id, answer.member_id)
    return answer


def _types(entries) -> list[tuple[int, bool]]:
    return [(record_type(k), v is None) for k, v in entries]


def test_record_bytes_follow_kafkas_layout():
    log = Log()

    async def run():
        groups = _groups(log, clock=lambda: 1_700_000_000_123)
        await _beat(groups, _hb("m1", 0, rack_id="r1"))
        groups.stop()
    asyncio.run(run())
    by_type = {record_type(k): (k, v) for k, v in log.records}
    assert sorted(by_type) == [3, 5, 6, 7, 8]
    # v0 | assignment epoch 2 | one tagged field: tag 0 (AssignmentTimestamp), 8 bytes: when it was computed
    assert by_type[6] == (struct.pack(">hh", 6, 1) + b"g",
                          struct.pack(">hi", 0, 2) + b"\x01\x00\x08" + struct.pack(">q", 1_700_000_000_123))
    key, value = by_type[3]
    # epoch 2, then one tagged field: tag 0 (MetadataHash), 8 bytes
    topics_hash = record_log.topics_hash({"a": (T1, 4)})
    assert topics_hash != 0
    assert key == struct.pack(">hh", 3, 1) + b"g" and value == struct.pack(">hi", 0, 2) + b"\x01\x00\x08" + struct.pack(
        ">q", topics_hash)
    key, value = by_type[8]
    assert key == struct.pack(">hh", 8, 1) + b"g" + struct.pack(">h", 2) + b"m1"
    # v0 | epoch 2 | previous 0 | state 0 | one topic (T1, [0..3], one tag: 0, AssignmentEpochs, 17 bytes:
    # all given at epoch 2) | none to revoke | no tags
    assert value == (struct.pack(">hiib", 0, 2, 0, 0) + b"\x02" + T1.bytes + b"\x05" + struct.pack(">4i", 0, 1, 2, 3)
                     + b"\x01\x00\x11\x05" + struct.pack(">4i", 2, 2, 2, 2) + b"\x01" + b"\x00")
    key, value = by_type[5]
    assert value.startswith(struct.pack(">h", 0) + b"\x00" + b"\x03r1" + b"\x02c" + b"\x03/h" + b"\x02\x02a")


def test_a_heartbeat_writes_what_changed_and_tombstones_what_went():
    log = Log()

    async def run():
        groups = _groups(log)
        await _beat(groups, _hb("m1", 0))
        first = len(log.records)
        await _beat(groups, _hb("m1", 2, owned={T1: {0, 1, 2, 3}}))
        assert len(log.records) == first  # nothing changed: nothing written
        await _beat(groups, _hb("m2", 0))
        joined = _types(log.records[first:])
        assert (5, False) in joined and (3, False) in joined and (8, False) in joined  # m2, epoch 3
        mark = len(log.records)
        await _beat(groups, _hb("m2", -1, owned=None))
        left = _types(log.records[mark:])
        assert left.count((5, True)) == 1 and left.count((8, True)) == 1 and left.count((7, True)) == 1
        assert (3, False) in left  # the group epoch moved
        groups.stop()
    asyncio.run(run())


def test_a_failed_append_is_the_heartbeats_error_and_its_change_is_undone():
    """The join not written is not kept: neither in memory nor by the next heartbeat's write (the full
    cases: test_consumer_group_undo.py)."""
    log = Log()

    async def run():
        groups = _groups(log)
        await _beat(groups, _hb("m1", 0))
        log.fail = ErrorCode.NOT_COORDINATOR
        with pytest.raises(GroupError) as caught:
            await groups.heartbeat_written(_hb("m2", 0), TIMEOUTS)
        assert caught.value.error_code == ErrorCode.NOT_COORDINATOR
        log.fail = None
        await groups.heartbeat_written(_hb("m1", 2, owned={T1: {0, 1, 2, 3}}), TIMEOUTS)
        assert set(groups.groups["g"].members) == {"m1"}
        rebuilt = _replayed(log)
        assert set(rebuilt.groups["g"].members) == {"m1"}
        groups.stop()
        rebuilt.stop()
    asyncio.run(run())


def _replayed(log: Log, partitions: int = 4, topics: dict | None = None) -> ConsumerGroups:
    groups = _groups(log, partitions, topics)
    for key, value in log.records:
        groups.replay(key, value)
    groups.loaded(45000)
    return groups


def test_a_restarted_coordinator_rebuilds_epochs_members_and_assignments():
    log = Log()

    async def run():
        groups = _groups(log)
        await _beat(groups, _hb("m1", 0))
        await _beat(groups, _hb("m2", 0, instance_id="i2"))
        revoking = await _beat(groups, _hb("m1", 2, owned={T1: {0, 1, 2, 3}}))  # m1 must give two up
        before = groups.groups["g"]
        rebuilt = _replayed(log)
        after = rebuilt.groups["g"]
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch) == (3, 3)
        assert after.target == before.target
        assert after.assignment_ms == before.assignment_ms > 0  # the interval counts from it after a restart
        for member_id, was in before.members.items():
            now = after.members[member_id]
            assert (now.epoch, now.previous_epoch, now.state, now.assigned, now.pending_revocation, now.held_since,
                    now.instance_id, now.subscribed, now.rebalance_timeout_ms, now.client_id) == (
                was.epoch, was.previous_epoch, was.state, was.assigned, was.pending_revocation, was.held_since,
                was.instance_id, was.subscribed, was.rebalance_timeout_ms, was.client_id)
            assert now.session_timer is not None  # its session restarts at the load
        assert after.members["m1"].state == MemberState.UNREVOKED_PARTITIONS
        assert after.members["m1"].rebalance_timer is not None
        assert after.topics == {"a": (T1, 4)} and after.state.value == "Reconciling"
        groups.stop()
        # The members carry on with the rebuilt coordinator, at their epochs.
        done = await _beat(rebuilt, _hb("m1", 2, owned={T1: revoking.assignment[T1]}))
        assert done.member_epoch == 3
        # what m1 kept it holds since epoch 2, also for the coordinator loaded after it moved to 3
        moved = _replayed(log).groups["g"].members["m1"]
        assert moved.epoch == 3 and moved.held_since == {(T1, p): 2 for p in revoking.assignment[T1]}
        moved_groups = _replayed(log)
        moved_groups.check_commit("g", MemberCheck("m1", 2, partitions=(("a", min(revoking.assignment[T1])),)))
        moved_groups.stop()
        taken = await _beat(rebuilt, _hb("m2", 3, owned={}))
        assert taken.member_epoch == 3 and taken.assignment == {T1: {0, 1, 2, 3} - revoking.assignment[T1]}
        assert rebuilt.groups["g"].group_epoch == 3  # no rebalance
        # Everyone leaves and the group is deleted: its records are all tombstoned.
        await _beat(rebuilt, _hb("m1", -1, owned=None))
        await _beat(rebuilt, _hb("m2", -1, owned=None, instance_id="i2"))
        assert rebuilt.delete("g") == ErrorCode.NONE
        await rebuilt.persist("g")
        rebuilt.stop()
        assert "g" not in _replayed(log).groups
    asyncio.run(run())


def test_a_topic_left_while_revoking_is_written_as_partitions_to_revoke():
    """The heartbeat at which a member still revoking leaves a topic writes its current assignment (record
    8): that topic's partitions among those to revoke, with the epochs they were given at, as Kafka writes
    it; a coordinator loading the log has the member so."""
    log, t2 = Log(), uuid.UUID(int=2)
    topics = {"a": (T1, 2), "b": (t2, 2)}

    async def run():
        groups = _groups(log, topics=topics)
        both = {"subscribed": ["a", "b"], "server_assignor": "range"}
        await _beat(groups, _hb("m1", 0, **both))  # epoch 2: all four
        await _beat(groups, _hb("m2", 0, **both))  # epoch 3
        held = {T1: {0, 1}, t2: {0, 1}}
        await _beat(groups, _hb("m1", 2, owned=held))  # told to revoke a-1 and b-1
        mark = len(log.records)
        await _beat(groups, _hb("m1", 2, owned=held, subscribed=["a"]))
        written = [(record_type(k), v is None) for k, v in log.records[mark:]]
        assert (8, False) in written
        m1 = groups.groups["g"].members["m1"]
        assert (m1.assigned, m1.pending_revocation) == ({T1: {0}}, {T1: {1}, t2: {0, 1}})
        loaded = _replayed(log, topics=topics)
        now = loaded.groups["g"].members["m1"]
        assert (now.epoch, now.previous_epoch, now.state, now.assigned, now.pending_revocation, now.held_since) == (
            2, 2, MemberState.UNREVOKED_PARTITIONS, m1.assigned, m1.pending_revocation,
            {(t, p): 2 for t in (T1, t2) for p in (0, 1)})
        groups.stop()
        loaded.stop()
    asyncio.run(run())


def test_a_server_assignor_change_alone_is_written_and_moves_no_epoch():
    """As Kafka 4.3.1 (hasMemberSubscriptionChanged looks at the topic names only): a member naming another
    assignor has its member record (5) written, but the group epoch stays; the next target computed
    uses it."""
    log = Log()

    async def run():
        groups = _groups(log)
        await _beat(groups, _hb("m1", 0, server_assignor="range"))  # epoch 2
        group = groups.groups["g"]
        mark = len(log.records)
        answer = await _beat(groups, _hb("m1", 2, owned={T1: {0, 1, 2, 3}}, server_assignor="uniform"))
        assert (answer.member_epoch, group.group_epoch, group.assignment_epoch) == (2, 2, 2)
        assert _types(log.records[mark:]) == [(5, False)]
        loaded = _replayed(log)
        assert loaded.groups["g"].members["m1"].server_assignor == "uniform"
        loaded.stop()
        await _beat(groups, _hb("m2", 0))
        assert (group.assignment_epoch, group.assignor) == (3, "uniform")
        groups.stop()
    asyncio.run(run())


def test_a_held_partition_without_assignment_epochs_counts_from_the_member_epoch():
    """Kafka before 4.3 wrote record 8 without AssignmentEpochs, and a count that does not match the
    partitions is not trusted: Kafka 4.3.1 takes the member epoch for that topic's partitions."""
    groups = _groups(Log())
    meta = struct.pack(">hh", 3, 1) + b"g"
    groups.replay(meta, struct.pack(">hi", 0, 5) + b"\x00")
    key = struct.pack(">hh", 8, 1) + b"g" + struct.pack(">h", 2) + b"m1"
    topic = b"\x02" + T1.bytes + b"\x03" + struct.pack(">2i", 0, 1)
    groups.replay(key, struct.pack(">hiib", 0, 5, 4, 0) + topic + b"\x00" + b"\x01" + b"\x00")
    member = consumer_records.KIND.group_from_records("g", groups.records.written["g"])[0].members["m1"]
    assert member.held_since == {(T1, 0): 5, (T1, 1): 5}
    short = b"\x01\x00\x05\x02" + struct.pack(">i", 3)  # one epoch for two partitions
    groups.replay(key, struct.pack(">hiib", 0, 5, 4, 0) + topic + short + b"\x01" + b"\x00")
    member = consumer_records.KIND.group_from_records("g", groups.records.written["g"])[0].members["m1"]
    assert member.held_since == {(T1, 0): 5, (T1, 1): 5}
    # a static member gone for now (epoch -2): its partitions count from 0, as Kafka's max(epoch, 0)
    groups.replay(key, struct.pack(">hiib", 0, -2, 4, 0) + topic + b"\x00" + b"\x01" + b"\x00")
    member = consumer_records.KIND.group_from_records("g", groups.records.written["g"])[0].members["m1"]
    assert member.held_since == {(T1, 0): 0, (T1, 1): 0}
    member.held_since = {}
    assert member.epoch_held_since(T1, 0) == 0


def test_records_of_a_newer_kafka_are_read_and_unwritten_types_skipped():
    key = struct.pack(">hh", 3, 1) + b"g"
    groups = _groups(Log())
    groups.replay(key, struct.pack(">hi", 0, 7) + b"\x01\x00\x08" + struct.pack(">q", 99))  # MetadataHash tag
    assert consumer_records.KIND.group_from_records("g", groups.records.written["g"])[0].group_epoch == 7
    assert 4 in consumer_records.KNOWN_TYPES and 16 in consumer_records.KNOWN_TYPES
    assert 4 not in consumer_records.WRITTEN_TYPES


def test_topics_that_changed_while_away_move_the_group_epoch():
    log = Log()

    async def run():
        groups = _groups(log)
        await _beat(groups, _hb("m1", 0))
        groups.stop()
        same = _replayed(log)
        assert (await _beat(same, _hb("m1", 2, owned={T1: {0, 1, 2, 3}}))).member_epoch == 2
        same.stop()
        grown = _replayed(log, partitions=6)  # the topic grew while the coordinator was down
        answer = await _beat(grown, _hb("m1", 2, owned={T1: {0, 1, 2, 3}}))
        assert answer.member_epoch == 3 and answer.assignment == {T1: set(range(6))}
        grown.stop()
    asyncio.run(run())


def test_a_malformed_key_is_skipped_at_load():
    groups = _groups(Log())
    groups.replay(struct.pack(">hh", 5, 40) + b"g", b"\x00\x00")  # its group id runs past the key
    assert groups.loaded(45000) == []


_NAMED = {"group_metadata": "Metadata", "member_metadata": "MemberMetadata",
          "target_metadata": "TargetAssignmentMetadata", "target_member": "TargetAssignmentMember",
          "current_assignment": "CurrentMemberAssignment"}


@pytest.mark.parametrize(("module", "prefix"), [(consumer_records, "ConsumerGroup"), (share_records, "ShareGroup")])
def test_each_kind_names_its_record_types_by_keyword(module, prefix):
    """record_log.GroupKind takes each written record's type by name (the two kinds number them in
    different orders): each named type keys to its own record's class, it is in the kind's WRITTEN_TYPES,
    and the write order is Kafka's whatever the numbering. A call by position is refused."""
    kind = module.KIND
    for attr, record in _NAMED.items():
        assert kind.keys[getattr(kind, attr)].__name__ == f"{prefix}{record}Key"
    own = getattr(module, "OWN_TYPES", ())  # a kind's own group records (share groups' type 15)
    assert sorted([*(getattr(kind, attr) for attr in _NAMED), *own]) == sorted(module.WRITTEN_TYPES)
    assert sorted(_NAMED, key=lambda attr: kind.write_order[getattr(kind, attr)]) == [
        "member_metadata", "group_metadata", "target_member", "target_metadata", "current_assignment"]
    types = tuple(getattr(kind, attr) for attr in _NAMED)
    with pytest.raises(TypeError):  # the five types as one positional tuple, as it was taken before
        type(kind)(kind.name, kind.keys, types, (kind.metadata_value, kind.target_member_value),
                   kind.new_group, kind.new_member)
