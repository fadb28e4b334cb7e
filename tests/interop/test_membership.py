"""Group membership the Java consumer (kafka-clients 4.3.1) relies on, against Ebb.

The cooperative-sticky assignor: a second member joins a group whose first member holds all four
partitions; after the incremental rebalance each holds two, and the first gave up only the two that
moved (never all four, never "lost"). Static membership: a member with a group.instance.id closes
(which sends no LeaveGroup for a static member), stays listed while its session lasts, and a new
consumer under the same instance id gets the same partitions back at the same generation, without a
rebalance. One JVM runs the `membership` suite of ebb.interop.MembershipChecks.
"""

from __future__ import annotations

import pytest

PREFIX = "membership"
TOPIC = f"{PREFIX}-members"
ALL = [f"{TOPIC}-{p}" for p in range(4)]


@pytest.fixture(scope="module")
def steps(java, broker):
    return java.interop(broker.bootstrap, PREFIX, "membership")


def test_cooperative_sticky_moves_only_what_it_must(steps):
    line = steps.ok("cooperative")
    assert line["alone"] == ALL
    assert sorted(line["a"] + line["b"]) == ALL and len(line["a"]) == len(line["b"]) == 2, line
    # the first member revoked exactly the two partitions the second one now holds, and nothing was lost
    assert line["a_revoked"] == [line["b"]] and line["a_lost"] == [] and line["b_revoked"] == [], line


def test_a_static_member_comes_back_without_a_rebalance(steps):
    line = steps.ok("static")
    assert line["assigned_before"] == line["assigned_after"] == ALL
    assert line["generation_after"] == line["generation_before"], line
    assert not line["same_member_id"]  # the coordinator gives the returning instance a new member id
    assert line["while_away"] == {"state": "Stable", "members": ["instance-1/static-a"]}, line
    # the returning instance keeps the member's recorded client id: Kafka 4.3.1 answers the same
    # (this suite run against a Kafka node printed "instance-1/static-a" here too)
    assert line["after"] == {"state": "Stable", "members": ["instance-1/static-a"]}, line
