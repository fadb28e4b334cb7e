"""KIP-932's Java share consumer (kafka-clients 4.3.1 KafkaShareConsumer) against Ebb: ten records
read from the start of a two-partition topic (share.auto.offset.reset=earliest as a group config), the
first five accepted and the others released in explicit acknowledgement mode, the released five
delivered again with delivery count 2 and accepted, and the Admin client's description of the group
with its one member; and a group with share.isolation.level=read_committed over a transactional
producer's commits and abort. One JVM runs the `share` suite of ebb.interop.ShareChecks."""

from __future__ import annotations

import pytest

PREFIX = "share"
# A member gets its partitions at a heartbeat after they are initialized: at the default 5 s interval
# each group's consumer waited seconds for its first records
BROKER_OVERRIDES = {"group.share.min.heartbeat.interval.ms": "500", "group.share.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def steps(java, broker):
    return java.interop(broker.bootstrap, PREFIX, "share")


def test_the_share_consumer_reads_acknowledges_and_gets_released_records_again(steps):
    line = steps.ok("share_consume")
    assert line["accepted"] == [f"v{i}" for i in range(5)], line
    assert line["released"] == [f"v{i}" for i in range(5, 10)], line
    assert line["again"] == {f"v{i}": 2 for i in range(5, 10)}, line
    assert (line["state"], line["members"]) == ("Stable", 1), line


def test_a_read_committed_share_consumer_gets_committed_records_only(steps):
    """The aborted records are archived by the leader, the markers acknowledged as gaps by the consumer:
    the six committed records come, and the group's lag on the partition falls to 0."""
    line = steps.ok("share_read_committed")
    assert line["received"] == sorted([f"first-{i}" for i in range(3)] + [f"second-{i}" for i in range(3)]), line
    assert line["lag"] == 0, line
