"""What a KIP-848 heartbeat costs with regex subscriptions: each pattern is compiled and resolved once
while the topics stay as they are, not at every heartbeat (broker/group/consumer_groups.py)."""

from __future__ import annotations

import asyncio
import uuid

from broker.group import consumer_groups
from broker.group.consumer_groups import MAX_REGEX_LENGTH, ClassicIds, ConsumerGroups, ConsumerHeartbeat
from broker.group.consumer_groups import ConsumerTimeouts as Timeouts
from broker.group.group import GroupError
from protocol.errors import ErrorCode

TIMEOUTS = Timeouts(45_000, 5_000)


def _hb(member: str, epoch: int, owned=None, regex: str | None = None) -> ConsumerHeartbeat:
    return ConsumerHeartbeat("g", member, epoch, None, None, 30_000 if epoch == 0 else -1, None, regex, None,
                             {} if owned is None else owned, "unit", "/127.0.0.1")


def test_regex_is_resolved_once_while_the_topics_stay(monkeypatch):
    resolved = []
    real = consumer_groups.matching
    monkeypatch.setattr(consumer_groups, "matching", lambda p, names: resolved.append(p) or real(p, names))
    now = [{f"topic-{i}": (uuid.UUID(int=i + 1), 1) for i in range(10_000)}]
    groups = ConsumerGroups(100, ["uniform"], lambda: now[0], ClassicIds(lambda g: False, lambda g: False,
                                                                          lambda g: None), is_share=lambda g: False)

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
                            is_share=lambda g: False)
    pattern = "|".join(f"t{i}" for i in range(MAX_REGEX_LENGTH))[:MAX_REGEX_LENGTH + 1]
    try:
        groups.check_request(_hb("a", 0, regex=pattern))
    except GroupError as exc:
        assert exc.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    else:
        raise AssertionError("an overlong pattern was taken")
    groups.check_request(_hb("a", 0, regex=pattern[:MAX_REGEX_LENGTH]))
