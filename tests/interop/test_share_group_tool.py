"""kafka-share-groups (kafka-tools 4.3.1's ShareGroupCommand) against Ebb's share groups (KIP-932):
--list, --describe --members [--verbose] and --state, --delete refused while a member is in; once it
left, --reset-offsets --to-earliest/--to-latest (AlterShareGroupOffsets), --describe [--offsets
--verbose] (DescribeShareGroupOffsets: start offsets and lag), --delete-offsets, then --delete. One
member joins over the wire (ShareGroupHeartbeat); the topic holds 6 records in partition 0."""

from __future__ import annotations

import pytest

from protocol.messages import ShareGroupHeartbeatRequest
from tests.broker.data_wire import WireClient, batch, create_topic, produce
from tests.broker.group_wire import share_settled

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
GROUP, TOPIC, MEMBER = "tool-share", "tool-share-topic", "member-1"


@pytest.fixture(scope="module")
def member(broker):
    with WireClient(broker.port) as client:
        create_topic(client, TOPIC, partitions=2)
        for _ in range(3):
            assert produce(client, TOPIC, 0, batch([b"a", b"b"])).error_code == 0
        joined = client.send(ShareGroupHeartbeatRequest(group_id=GROUP, member_id=MEMBER, member_epoch=0,
                                                        subscribed_topic_names=[TOPIC]), 1)
        assert joined.error_code == 0, joined
        # the partitions are assigned at a heartbeat after their states were initialized (Kafka's way)
        assigned = share_settled(client, GROUP, MEMBER, joined.member_epoch)
        assert assigned.error_code == 0 and assigned.assignment is not None, assigned
        yield client, assigned.member_epoch


def test_list_describe_and_delete(java, broker, member):
    def tool(*args: str) -> list[str]:
        result = java.tool(broker.bootstrap, SHARE_GROUPS, *args)
        assert result.returncode == 0, result.stderr[-2000:]
        return [line.split() for line in result.stdout.splitlines() if line.strip()]

    assert [GROUP] in tool("--list")
    assert tool("--describe", "--group", GROUP, "--members") == [
        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
        [GROUP, MEMBER, "/127.0.0.1", "ebb-data-test", "2", f"{TOPIC}:0,1"]]
    assert tool("--describe", "--group", GROUP, "--members", "--verbose")[1] == [
        GROUP, MEMBER, "/127.0.0.1", "ebb-data-test", "2", "2", f"{TOPIC}:0,1"]
    [header, state] = tool("--describe", "--group", GROUP, "--state")
    assert (header, state[0], state[-2:]) == (["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"], GROUP,
                                              ["Stable", "1"])
    refused = " ".join(map(" ".join, tool("--delete", "--group", GROUP)))
    assert f"Share group '{GROUP}' is not EMPTY." in refused
    client, epoch = member
    assert client.send(ShareGroupHeartbeatRequest(group_id=GROUP, member_id=MEMBER, member_epoch=-1), 1).error_code == 0
    reset = tool("--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute")
    assert sorted(reset[1:]) == [[GROUP, TOPIC, "0", "0"], [GROUP, TOPIC, "1", "0"]]
    assert tool("--describe", "--group", GROUP) == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                                                    [GROUP, TOPIC, "0", "0", "6"], [GROUP, TOPIC, "1", "0", "0"]]
    tool("--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-latest", "--execute")
    assert tool("--describe", "--group", GROUP, "--offsets", "--verbose")[1] == [GROUP, TOPIC, "0", "0", "6", "0"]
    assert tool("--delete-offsets", "--group", GROUP, "--topic", TOPIC) == [["TOPIC", "STATUS"], [TOPIC, "Successful"]]
    assert tool("--describe", "--group", GROUP) == [["Share", "group", f"'{GROUP}'", "has", "no", "offset",
                                                     "information."]]
    deleted = " ".join(map(" ".join, tool("--delete", "--group", GROUP)))
    assert f"Deletion of requested share groups ('{GROUP}') was successful." in deleted, deleted
    assert [GROUP] not in tool("--list")
