"""The server-side assignors of KIP-848 consumer groups (group.consumer.assignors): uniform and range.

uniform (Kafka's UniformAssignor, the default): every partition of the subscribed topics goes to one
subscribed member, member counts differing by at most one when members subscribe alike; a member
keeps what it held where that balance allows (stickiness), and the rest goes to the members holding
least. Members subscribing differently share each topic among its subscribers, so that a member
subscribing to more topics does not starve one subscribing to fewer. range (Kafka's RangeAssignor):
per topic, its subscribers sorted by member id take contiguous ranges, the first (partitions % members)
one partition more.
"""

from __future__ import annotations

import heapq
import uuid
from collections import Counter

from broker.group.member_group import Assignment
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
    subscribed = {m: sorted(n for n in set(members[m]) if n in topics) for m in sorted(members)}
    if len({tuple(names) for names in subscribed.values()}) > 1:
        return _heterogeneous(subscribed, topics, current)
    names = next(iter(subscribed.values()), [])
    partitions = [(topics[n][0], p) for n in names for p in range(topics[n][1])]
    if partitions:
        for member_id, held in _balance(sorted(members), partitions, current).items():
            for topic_id, p in held:
                result[member_id].setdefault(topic_id, set()).add(p)
    return result


def _heterogeneous(subscribed: dict[str, list[str]], topics: Topics,
                   current: dict[str, Assignment]) -> dict[str, Assignment]:
    """Members subscribing differently (Kafka's heterogeneous uniform assignment): each topic's partitions
    go to its subscribers, the topics with fewest subscribers first, each partition to the subscriber
    holding least so far. A first pass without stickiness sets each member's fair count per topic; each
    member then keeps what it held up to those counts, and the rest is handed out the same way."""
    subscribers: dict[str, list[str]] = {}
    for member_id, names in subscribed.items():
        for name in names:
            subscribers.setdefault(name, []).append(member_id)
    order = sorted(subscribers, key=lambda n: (len(subscribers[n]), n))
    # How many partitions of each topic each member takes when nothing is kept: what it may keep.
    fair = Counter((m, t) for m, keys in _fill(order, subscribers, topics, {m: set() for m in subscribed}).items()
                   for t, _ in keys)
    by_id = {topic_id: name for name, (topic_id, _) in topics.items()}
    kept: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in subscribed}
    taken: set[tuple[uuid.UUID, int]] = set()
    for member_id in sorted(subscribed, key=lambda m: (-sum(len(p) for p in current.get(m, {}).values()), m)):
        wanted = set(subscribed[member_id])
        for topic_id, parts in sorted(current.get(member_id, {}).items()):
            topic = by_id.get(topic_id)
            if topic is None or topic not in wanted:
                continue
            for p in sorted(parts):
                key = (topic_id, p)
                if p < topics[topic][1] and key not in taken and fair[member_id, topic_id] > 0:
                    fair[member_id, topic_id] -= 1
                    kept[member_id].add(key)
                    taken.add(key)
    held = _fill(order, subscribers, topics, kept, taken)
    result: dict[str, Assignment] = {m: {} for m in subscribed}
    for member_id, keys in held.items():
        for topic_id, p in keys:
            result[member_id].setdefault(topic_id, set()).add(p)
    return result


def _fill(order: list[str], subscribers: dict[str, list[str]], topics: Topics,
          held: dict[str, set[tuple[uuid.UUID, int]]],
          taken: set[tuple[uuid.UUID, int]] | None = None) -> dict[str, set[tuple[uuid.UUID, int]]]:
    """Every partition of `order`'s topics not in `taken`, to the topic's subscriber holding least, of
    those the one with fewest other topics to take from (a heap per topic: log(members) a partition)."""
    taken = taken or set()
    width = Counter(m for names in subscribers.values() for m in names)
    for name in order:
        topic_id, count = topics[name]
        least = [(len(held[m]), width[m], m) for m in subscribers[name]]
        heapq.heapify(least)
        for p in range(count):
            if (topic_id, p) in taken:
                continue
            n, w, member_id = heapq.heappop(least)
            held[member_id].add((topic_id, p))
            heapq.heappush(least, (n + 1, w, member_id))
    return held


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
    # The rest, in topic and partition order, to whoever holds least: a heap of (count, member id), so
    # that each partition costs log(members), not a scan of them all.
    least = [(len(held[m]), m) for m in ids]
    heapq.heapify(least)
    for key in partitions:
        if key not in free:
            continue
        count, member_id = heapq.heappop(least)
        held[member_id].append(key)
        heapq.heappush(least, (count + 1, member_id))
    return held
