"""One share group (KIP-932) and its members, and the simple assignor that shares its partitions.

A share group has no rebalance: the coordinator computes a target assignment after the group epoch
moves (a member joins, leaves, expires or changes its subscription, a subscribed topic appears or
grows, or a heartbeat finds newly initialized share-partitions: only those are assigned, as Kafka), at
most once per assignment interval (share_groups.py), and a member takes it at its next heartbeat (share
groups need no revocation: records are locked one by one, not partitions). States are Kafka's
ShareGroupState: Empty (no members), Stable (members), Dead (deleted).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from broker.group.member_group import Assignment, MemberGroup

GROUP_TYPE = "share"
ASSIGNOR_NAME = "simple"


class ShareGroupState(StrEnum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(eq=False)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None = None
    subscribed: list[str] = field(default_factory=list)
    epoch: int = 0
    previous_epoch: int = 0
    assignment: Assignment = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None


@dataclass(frozen=True)
class StatePartitions:
    """Which share-partitions of the group have state with the share coordinators (Kafka's
    ShareGroupStatePartitionMetadataInfo, record type 15): topic id -> (name, partitions) initialized, and
    being initialized with when that was asked (ms, the load's time for a replayed record: an ask older than
    INIT_RETRY_MS is made again); topic id -> name of topics whose states are being deleted. Replaced, never
    changed in place, so that a failed change's undo restores the one before."""
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)
    initializing: dict[uuid.UUID, tuple[str, frozenset[int], int]] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)

    def to_initialize(self, topics: dict[str, tuple[uuid.UUID, int]], now_ms: int) -> dict[uuid.UUID, set[int]]:
        """The subscribed partitions neither initialized nor asked for within INIT_RETRY_MS (Kafka's
        subscribedTopicsChangeMap): a new topic's, and those a topic grew by."""
        wanted: dict[uuid.UUID, set[int]] = {}
        for topic_id, count in topics.values():
            done = set(self.initialized.get(topic_id, ("", frozenset()))[1])
            if (asked := self.initializing.get(topic_id)) is not None and now_ms - asked[2] < INIT_RETRY_MS:
                done |= asked[1]
            if missing := set(range(count)) - done:
                wanted[topic_id] = missing
        return wanted

    def asked(self, names: dict[uuid.UUID, str], partitions: dict[uuid.UUID, set[int]],
              now_ms: int) -> StatePartitions:
        """With `partitions` being initialized from now (no longer deleting)."""
        initializing = dict(self.initializing)
        for topic_id, parts in partitions.items():
            before = initializing.get(topic_id, ("", frozenset(), 0))[1]
            initializing[topic_id] = (names[topic_id], before | parts, now_ms)
        deleting = {t: n for t, n in self.deleting.items() if t not in partitions}
        return StatePartitions(dict(self.initialized), initializing, deleting)

    def answered(self, partitions: dict[uuid.UUID, set[int]], *, done: bool) -> StatePartitions:
        """`partitions` no longer being initialized: initialized when `done` (Kafka's
        initializeShareGroupState), else to be asked again (its uninitializeShareGroupState). A topic no
        longer initializing (deleted, or its group's states deleted, while the answer was awaited) is left
        out: the answer must not bring it back."""
        initializing, initialized = dict(self.initializing), dict(self.initialized)
        for topic_id, parts in partitions.items():
            if (asked := initializing.pop(topic_id, None)) is None:
                continue
            if left := asked[1] - parts:
                initializing[topic_id] = (asked[0], left, asked[2])
            if done:
                initialized[topic_id] = (asked[0], initialized.get(topic_id, ("", frozenset()))[1] | parts)
        return StatePartitions(initialized, initializing, dict(self.deleting))

    def assignable(self, topics: dict[str, tuple[uuid.UUID, int]]) -> dict[str, tuple[uuid.UUID, frozenset[int]]]:
        """The subscribed partitions the assignor may give out: only initialized ones (Kafka's
        topicAssignablePartitionsMap), so that no member fetches before the state is made."""
        found = {}
        for name, (topic_id, count) in topics.items():
            if (done := self.initialized.get(topic_id)) is not None:
                found[name] = (topic_id, frozenset(p for p in done[1] if p < count))
        return found

    def pending(self, topics: dict[str, tuple[uuid.UUID, int]], given: dict[uuid.UUID, frozenset[int]]) -> bool:
        """Initialized subscribed partitions the target does not give out exactly (`given`: what it gives
        out, ShareGroup.target_given; Kafka's initializedAssignmentPending): the next heartbeat moves the
        group epoch to assign them."""
        subscribed = {topic_id for topic_id, _ in topics.values()}
        return any(topic_id in subscribed and given.get(topic_id) != parts
                   for topic_id, (_, parts) in self.initialized.items())

    def forgotten(self, topic_ids: set[uuid.UUID]) -> StatePartitions:
        """Without these topics anywhere (Kafka's maybeCleanupShareGroupState: they were deleted)."""
        return StatePartitions({t: v for t, v in self.initialized.items() if t not in topic_ids},
                               {t: v for t, v in self.initializing.items() if t not in topic_ids},
                               {t: n for t, n in self.deleting.items() if t not in topic_ids})

    def named(self) -> dict[uuid.UUID, str]:
        """Every topic held here, by id."""
        return {**{t: v[0] for t, v in self.initialized.items()}, **{t: v[0] for t, v in self.initializing.items()},
                **self.deleting}

    def offsets_to_delete(self, topic_id: uuid.UUID, count: int) -> frozenset[int] | None:
        """DeleteShareGroupOffsets' share-partitions of a topic (Kafka's
        sharePartitionsEligibleForOffsetDeletion): its initialized ones, or all `count` of a topic whose
        deletion is unfinished; None when it has no state to delete."""
        if (done := self.initialized.get(topic_id)) is not None:
            return done[1]
        return frozenset(range(count)) if topic_id in self.deleting else None

    def deleting_from(self, topics: dict[uuid.UUID, str]) -> StatePartitions:
        """These topics' states about to be deleted: no longer initialized, listed as deleting until done
        (written before the share coordinators are asked, as Kafka does)."""
        return StatePartitions({t: v for t, v in self.initialized.items() if t not in topics},
                               dict(self.initializing), {**self.deleting, **topics})

    def deleted(self, topic_ids: set[uuid.UUID]) -> StatePartitions:
        """These topics' states deleted: no longer deleting (initialized again when next subscribed)."""
        return StatePartitions(dict(self.initialized), dict(self.initializing),
                               {t: n for t, n in self.deleting.items() if t not in topic_ids})

    def all_to_delete(self, count_of: Callable[[uuid.UUID, str], int | None]
                      ) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
        """A deleted group's share-partitions (Kafka's shareGroupBuildPartitionDeleteRequest): those
        initialized or being initialized, and every partition of a topic still being deleted, if it
        exists (`count_of`: its partition count, None when gone)."""
        held = [(t, name, parts) for t, (name, parts) in self.initialized.items()]
        held += [(t, name, parts) for t, (name, parts, _) in self.initializing.items()]
        for topic_id, name in self.deleting.items():
            if (count := count_of(topic_id, name)) is not None:
                held.append((topic_id, name, frozenset(range(count))))
        found: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
        for topic_id, name, parts in held:
            found[topic_id] = (name, found.get(topic_id, (name, frozenset()))[1] | parts)
        return found


# Kafka's group.share.initialize.retry.interval.ms default: an initialization asked for and not answered
# (its coordinator moved meanwhile) is asked again after this long.
INIT_RETRY_MS = 30_000


@dataclass(eq=False)
class ShareGroup(MemberGroup[ShareMember]):
    # Its record 15, once anything was initialized (None: none written, as a group Ebb wrote before it had one).
    state_partitions: StatePartitions | None = None
    # Rebuilt from records without a record 15 (share_groups.py: its states were made by their leaders).
    legacy_states: bool = False
    # Two things derived from the members, kept so that a steady heartbeat walks no member: what the target
    # gives out over all of them (topic id -> partitions: the check for initialized partitions not given
    # out) and the topic names they subscribe to. None: derived at the next need. Only the methods below
    # change what they derive from (membership, subscriptions, the target), and each drops what it
    # outdates, so no caller has to; a group read back from its records starts without them. Replaced,
    # never changed in place, so that an undo restoring the fields restores them consistently.
    _given: dict[uuid.UUID, frozenset[int]] | None = field(default=None, init=False, repr=False)
    _subscribed: frozenset[str] | None = field(default=None, init=False, repr=False)

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_names(self) -> frozenset[str]:
        if self._subscribed is None:
            self._subscribed = frozenset(name for m in self.members.values() for name in m.subscribed)
        return self._subscribed

    def target_given(self) -> dict[uuid.UUID, frozenset[int]]:
        if self._given is None:
            self._given = _given(self.target)
        return self._given

    def join(self, member: ShareMember) -> bool:
        """`member` in the group (again, at each of its heartbeats); whether it is new here."""
        if self.members.get(member.member_id) is member:
            return False
        self.members[member.member_id] = member
        self._subscribed = None
        return True

    def subscribe(self, member: ShareMember, names: list[str]) -> bool:
        """A member of the group subscribing to `names`; whether that changed its subscription (a set:
        the same names in another order are no change, as Kafka's)."""
        if set(names) == set(member.subscribed):
            return False
        member.subscribed = names
        self._subscribed = None
        return True

    def remove(self, member_id: str) -> None:
        """The member and its target out of the group."""
        del self.members[member_id]
        self.target.pop(member_id, None)
        self._subscribed = self._given = None

    def set_target(self, target: dict[str, Assignment]) -> None:
        self.target = target
        self._given = _given(target)


def _given(target: dict[str, Assignment]) -> dict[uuid.UUID, frozenset[int]]:
    found: dict[uuid.UUID, set[int]] = {}
    for assignment in target.values():
        for topic_id, parts in assignment.items():
            found.setdefault(topic_id, set()).update(parts)
    return {topic_id: frozenset(parts) for topic_id, parts in found.items()}


def assign(members: dict[str, list[str]], topics: dict[str, tuple[uuid.UUID, frozenset[int]]],
           current: dict[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's simple assignor's rules, over each topic's assignable partitions (`topics`: name -> (id,
    partitions), those whose states are initialized): members with the same subscription share its partitions so that
    member counts differ by at most one; when there are fewer partitions than members each partition is
    given to several members (ceil(members / partitions) at most); a member keeps what it held where the
    balance allows (stickiness after balance). Members with different subscriptions are balanced within
    each set of members subscribing alike."""
    result: dict[str, Assignment] = {m: {} for m in members}
    classes: dict[tuple[str, ...], list[str]] = {}
    for member_id in sorted(members):
        names = tuple(sorted(n for n in set(members[member_id]) if n in topics))
        classes.setdefault(names, []).append(member_id)
    for names, ids in classes.items():
        partitions = [(topics[n][0], p) for n in names for p in sorted(topics[n][1])]
        if not partitions:
            continue
        for member_id, held in _share(ids, partitions, current).items():
            for topic_id, p in held:
                result[member_id].setdefault(topic_id, set()).add(p)
    return result


def _share(ids: list[str], partitions: list[tuple[uuid.UUID, int]],
           current: dict[str, Assignment]) -> dict[str, list[tuple[uuid.UUID, int]]]:
    sharing = _ceil(len(ids), len(partitions))  # members per partition, rounded up
    slots = sharing * len(partitions)
    # Member i's share of the slots: ceil(slots*(i+1)/M) - ceil(slots*i/M), as Kafka spreads them.
    desired = [_ceil(slots * (i + 1), len(ids)) - _ceil(slots * i, len(ids)) for i in range(len(ids))]
    holders: dict[tuple[uuid.UUID, int], int] = dict.fromkeys(partitions, 0)
    held: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in ids}
    for i, member_id in enumerate(ids):  # stickiness: keep what the balance allows
        for topic_id, parts in sorted(current.get(member_id, {}).items()):
            for p in sorted(parts):
                key = (topic_id, p)
                if key in holders and holders[key] < sharing and len(held[member_id]) < desired[i]:
                    holders[key] += 1
                    held[member_id].append(key)
    wanting = [m for i, m in enumerate(ids) if len(held[m]) < desired[i]]
    want = {m: desired[ids.index(m)] for m in wanting}
    turn = 0
    for key in partitions:  # then fill: each partition up to its sharing, round the unfilled members
        tries = 0
        while holders[key] < sharing and wanting and tries < len(wanting):
            member_id = wanting[turn % len(wanting)]
            if key in held[member_id]:
                turn, tries = turn + 1, tries + 1
                continue
            held[member_id].append(key)
            holders[key] += 1
            tries = 0
            if len(held[member_id]) >= want[member_id]:
                wanting.remove(member_id)
            else:
                turn += 1
    return held


def _ceil(a: int, b: int) -> int:
    return -(-a // b)
