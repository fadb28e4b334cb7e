"""The topics KIP-848 consumer groups subscribe to, as the coordinator sees them now: each regex's matches and
each group's topics are derived from one answer of TopicsNow and kept while it stays the same object (no
topic changed), so a heartbeat neither re-runs a regex nor recomputes its group's topics."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from broker.group.consumer_group import ConsumerGroup, ConsumerMember
from broker.group.consumer_regex import matching

# Every topic as the coordinator sees it now: name -> (id, partition count). The same object while no
# topic changes: what is derived from it (regex matches, each group's topics) is kept until then.
TopicsNow = Callable[[], "dict[str, tuple[uuid.UUID, int]]"]

MATCHES_KEPT = 10_000  # regex resolutions kept (one per distinct pattern of live members)


class SubscribedTopics:
    def __init__(self, topics: TopicsNow) -> None:
        self._topics = topics
        # Derived from one TopicsNow answer (`_seen`): each regex's matches, and the groups whose topics
        # were last computed on it (recomputed only when a subscription or the topics change).
        self._seen: dict[str, tuple[uuid.UUID, int]] | None = None
        self._matches: dict[str, list[str]] = {}
        self._groups_current: set[str] = set()

    def now(self) -> dict[str, tuple[uuid.UUID, int]]:
        everything = self._topics()
        if everything is not self._seen:
            self._seen, self._matches = everything, {}
            self._groups_current.clear()
        return everything

    def current(self, group: ConsumerGroup) -> bool:
        """Whether the group's topics were computed on the topics as they are now."""
        self.now()
        return group.group_id in self._groups_current

    def forget(self, group_id: str) -> None:
        """The group's topics are to be computed again (it is new, changed type, or the topics changed)."""
        self._groups_current.discard(group_id)

    def matching(self, pattern: str) -> list[str]:
        """A regex's topics, resolved once per pattern while the topics stay as they are."""
        everything = self.now()
        if (found := self._matches.get(pattern)) is None:
            if len(self._matches) >= MATCHES_KEPT:
                self._matches.clear()
            found = self._matches[pattern] = matching(pattern, everything)
        return found

    def names_of(self, member: ConsumerMember) -> list[str]:
        """The topic names the member subscribes to: by name, then its regex's matches."""
        return [*member.subscribed, *(self.matching(member.regex) if member.regex else [])]

    def of(self, group: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        """The topics the group's members subscribe to (by name or regex) that exist now."""
        everything = self.now()
        wanted: set[str] = set()
        for member in group.members.values():
            wanted.update(self.names_of(member))
        self._groups_current.add(group.group_id)
        return {n: everything[n] for n in sorted(wanted) if n in everything}
