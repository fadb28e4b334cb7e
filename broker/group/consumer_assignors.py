"""The server-side assignors of KIP-848 consumer groups (group.consumer.assignors): uniform and range.

uniform (Kafka's UniformAssignor, the default): every partition of the subscribed topics goes to one
subscribed member, member counts differing by at most one among members subscribing alike; a member
keeps what it held where that balance allows (stickiness), and the rest goes to the members holding
least. range (Kafka's RangeAssignor): per topic, its subscribers sorted by member id take contiguous
ranges, the first (partitions % members) one partition more.
"""

from __future__ import annotations

import uuid

from broker.group.consumer_group import Assignment
from broker.group_configs import RANGE_ASSIGNOR as RANGE

Topics = dict[str, tuple[uuid.UUID, int]]


def assign(name: str, members: dict[str, list[str]], topics: Topics,
           current: dict[str, Assignment]) -> dict[str, Assignment]:
    """`members`: member id -> the topic names it subscribes to (only existing ones count)."""
    if name == RANGE:
        return _range(members, topics)
    return _uniform(members, topics, current)


def _range(members: dict[str, list[str]], topics: Topics) -> dict[str, Assignment]:
    result: dict[str, Assignment] = {m: {} for m in members}
    for name, (topic_id, count) in sorted(topics.items()):
        subscribers = sorted(m for m, names in members.items() if name in names)
        if not subscribers:
            continue
        per, extra = divmod(count, len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            size = per + (1 if i < extra else 0)
            if size:
                result[member_id][topic_id] = set(range(start, start + size))
            start += size
    return result


def _uniform(members: dict[str, list[str]], topics: Topics,
             current: dict[str, Assignment]) -> dict[str, Assignment]:
    result: dict[str, Assignment] = {m: {} for m in members}
    classes: dict[tuple[str, ...], list[str]] = {}
    for member_id in sorted(members):
        names = tuple(sorted(n for n in set(members[member_id]) if n in topics))
        classes.setdefault(names, []).append(member_id)
    taken: set[tuple[uuid.UUID, int]] = set()
    # Members subscribing alike share their topics' partitions; classes overlapping on a topic share it
    # first come (by their sorted topic names), the next class getting what is left.
    for names, ids in sorted(classes.items()):
        partitions = [(topics[n][0], p) for n in names for p in range(topics[n][1])
                      if (topics[n][0], p) not in taken]
        if not partitions:
            continue
        for member_id, held in _balance(ids, partitions, current).items():
            for topic_id, p in held:
                result[member_id].setdefault(topic_id, set()).add(p)
                taken.add((topic_id, p))
    return result


def _balance(ids: list[str], partitions: list[tuple[uuid.UUID, int]],
             current: dict[str, Assignment]) -> dict[str, list[tuple[uuid.UUID, int]]]:
    per, extra = divmod(len(partitions), len(ids))
    free = set(partitions)
    held: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in ids}
    # Stickiness: the members holding most keep up to the larger quota first, while it lasts.
    order = sorted(ids, key=lambda m: (-sum(len(p) for p in current.get(m, {}).values()), m))
    bigger = extra
    for member_id in order:
        quota = per + (1 if bigger > 0 else 0)
        for topic_id, parts in sorted(current.get(member_id, {}).items()):
            for p in sorted(parts):
                if (topic_id, p) in free and len(held[member_id]) < quota:
                    free.discard((topic_id, p))
                    held[member_id].append((topic_id, p))
        if len(held[member_id]) > per:
            bigger -= 1
    for key in partitions:  # the rest, in topic and partition order, to whoever holds least
        if key not in free:
            continue
        member_id = min(ids, key=lambda m: (len(held[m]), m))
        held[member_id].append(key)
    return held
