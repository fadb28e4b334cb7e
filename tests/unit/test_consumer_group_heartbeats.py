"""KIP-848 heartbeats (broker/group/consumer_groups.py): what one costs with regex subscriptions (each
pattern compiled and resolved once while the topics stay as they are), and the rebalance timeout."""

from __future__ import annotations

import asyncio
import uuid

from broker.group import consumer_topics
from broker.group.consumer_groups import MAX_REGEX_LENGTH, ConsumerGroups, ConsumerHeartbeat
from broker.group.consumer_type_changes import ClassicIds
from broker.group.group import GroupError
from broker.group_configs import MemberTimeouts as Timeouts
from protocol.errors import ErrorCode

TIMEOUTS = Timeouts(45_000, 5_000, 0)


async def _append(group_id, entries) -> int:  # no log: these tests look at the groups in memory
    return 0


def _spawn(coro):
    return asyncio.get_running_loop().create_task(coro)


def _hb(member: str, epoch: int, owned=None, regex: str | None = None) -> ConsumerHeartbeat:
    return ConsumerHeartbeat("g", member, epoch, None, None, 30_000 if epoch == 0 else -1, None, regex, None,
                             {} if owned is None else owned, "unit", "/127.0.0.1")


def test_regex_is_resolved_once_while_the_topics_stay(monkeypatch):
    resolved = []
    real = consumer_topics.matching
    monkeypatch.setattr(consumer_topics, "matching", lambda p, names: resolved.append(p) or real(p, names))
    now = [{f"topic-{i}": (uuid.UUID(int=i + 1), 1) for i in range(10_000)}]
    groups = ConsumerGroups(100, ["uniform"], lambda: now[0], ClassicIds(lambda g: False, lambda g: False,
                                                                          lambda g: None), is_share=lambda g: False,
                            append=_append, spawn=_spawn)

    async def run():
        a = groups.heartbeat(_hb("a", 0, regex="topic-1.*"), TIMEOUTS)
        b = groups.heartbeat(_hb("b", 0, regex="topic-1.*"), TIMEOUTS)
        for _ in range(20):
            a = groups.heartbeat(_hb("a", a.member_epoch, groups.groups["g"].members["a"].assigned), TIMEOUTS)
            b = groups.heartbeat(_hb("b", b.member_epoch, groups.groups["g"].members["b"].assigned), TIMEOUTS)
        assert resolved == ["topic-1.*"]  # two members, 42 heartbeats: one resolution
        assert groups.groups["g"].state == "Stable" and len(groups.groups["g"].topics) == 1111
        # A new topic: the pattern is resolved again, and the group's topics follow.
        now[0] = {**now[0], "topic-1-new": (uuid.UUID(int=99_999), 1)}
        groups.heartbeat(_hb("a", a.member_epoch, {}), TIMEOUTS)
        assert resolved == ["topic-1.*", "topic-1.*"]
        assert "topic-1-new" in groups.groups["g"].topics
        groups.stop()
    asyncio.run(run())


def test_overlong_patterns_are_refused():
    groups = ConsumerGroups(100, ["uniform"], dict, ClassicIds(lambda g: False, lambda g: False, lambda g: None),
                            is_share=lambda g: False, append=_append, spawn=_spawn)
    pattern = "|".join(f"t{i}" for i in range(MAX_REGEX_LENGTH))[:MAX_REGEX_LENGTH + 1]
    try:
        groups.check_request(_hb("a", 0, regex=pattern))
    except GroupError as exc:
        assert exc.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    else:
        raise AssertionError("an overlong pattern was taken")
    groups.check_request(_hb("a", 0, regex=pattern[:MAX_REGEX_LENGTH]))


def test_the_rebalance_timeout_restarts_when_what_to_revoke_changes():
    """Kafka re-arms a member's rebalance timeout whenever its epoch or its partitions to revoke change,
    and the timeout removes the member only if it is still at the epoch it was armed for."""
    t1 = uuid.UUID(int=1)
    groups = ConsumerGroups(100, ["uniform"], lambda: {"a": (t1, 6)}, ClassicIds(lambda g: False, lambda g: False,
                                                                                 lambda g: None),
                            is_share=lambda g: False, append=_append, spawn=_spawn)

    def join(member: str):
        return groups.heartbeat(ConsumerHeartbeat("g", member, 0, None, None, 60_000, ["a"], None, None, {},
                                                  "unit", "/h"), TIMEOUTS)

    async def run():
        first = join("m1")
        assert first.assignment == {t1: set(range(6))}
        join("m2")
        groups.heartbeat(_hb("m1", first.member_epoch, {t1: set(range(6))}), TIMEOUTS)
        m1 = groups.groups["g"].members["m1"]
        armed, revoking = m1.rebalance_timer, dict(m1.pending_revocation)
        assert armed is not None and revoking
        join("m3")  # a new target: m1 revoked the first lot, and now has more to give up
        kept = {t1: set(range(6)) - revoking[t1]}
        groups.heartbeat(_hb("m1", m1.epoch, kept), TIMEOUTS)
        assert m1.pending_revocation and m1.pending_revocation != revoking
        assert m1.rebalance_timer is not None and m1.rebalance_timer is not armed
        # A timeout armed at an epoch the member has left removes nothing.
        groups.expire(groups.groups["g"], m1, "rebalance", m1.epoch - 1)
        assert "m1" in groups.groups["g"].members
        groups.stop()
    asyncio.run(run())
