"""The KIP-848 uniform assignor at scale and with members subscribing differently
(broker/group/consumer_assignors.py)."""

from __future__ import annotations

import random
import time
import uuid

from broker.group.consumer_assignors import assign


def _counts(result):
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def _check_owners(result, members, topics):
    owners: dict = {}
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    for member_id, assignment in result.items():
        for topic_id, parts in assignment.items():
            assert names[topic_id] in members[member_id]  # only what it subscribes to
            for p in parts:
                assert (topic_id, p) not in owners
                owners[topic_id, p] = member_id
    wanted = {n for subscribed in members.values() for n in subscribed if n in topics}
    assert set(owners) == {(topics[n][0], p) for n in wanted for p in range(topics[n][1])}


def test_overlapping_subscriptions_do_not_starve_a_member():
    t1, t2 = uuid.UUID(int=1), uuid.UUID(int=2)
    topics = {"t1": (t1, 6), "t2": (t2, 1)}
    members = {"a": ["t1"], "b": ["t1", "t2"], "c": ["t1", "t2"]}
    first = assign("uniform", members, topics, {})
    _check_owners(first, members, topics)
    assert sorted(_counts(first).values()) == [2, 2, 3]
    # One more member, subscribing to t2 only: it gets t2, the others keep their t1 partitions.
    members["d"] = ["t2"]
    second = assign("uniform", members, topics, first)
    _check_owners(second, members, topics)
    assert _counts(second) == {"a": 2, "b": 2, "c": 2, "d": 1}
    kept = sum(len(second[m].get(t1, set()) & first[m].get(t1, set())) for m in "abc")
    assert kept == 5  # only the partition needed for balance moved


def test_random_heterogeneous_subscriptions_give_every_partition_one_subscriber():
    rng = random.Random(848)
    topics = {f"t{i}": (uuid.UUID(int=i + 1), rng.randrange(0, 9)) for i in range(6)}
    current: dict = {}
    for _ in range(30):
        members = {f"m{i}": rng.sample(sorted(topics), rng.randrange(1, 4)) for i in range(rng.randrange(1, 8))}
        result = assign("uniform", members, topics, current)
        _check_owners(result, members, topics)
        current = result


def test_the_uniform_assignor_scales_with_members_times_partitions():
    """1000 members over 10k partitions: a scan of every member per partition took ~3 s; a heap takes
    a small fraction of a second."""
    topics = {f"t{i}": (uuid.UUID(int=i + 1), 100) for i in range(100)}
    members = {f"m{i:04d}": list(topics) for i in range(1000)}
    started = time.perf_counter()
    result = assign("uniform", members, topics, {})
    assert time.perf_counter() - started < 1.0
    assert set(_counts(result).values()) == {10}
