"""kafka-share-groups (kafka-tools 4.3.1's ShareGroupCommand) against Ebb's share groups (KIP-932):
--list, --describe --members [--verbose] and --state, and --delete refused while a member is in, then
done. One member joins over the wire (ShareGroupHeartbeat); --describe of offsets (DescribeShareGroupOffsets,
key 90) is not served yet (docs/features.md, "Share group gaps")."""

from __future__ import annotations

import pytest

from protocol.messages import ShareGroupHeartbeatRequest
from tests.broker.data_wire import WireClient, create_topic

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
GROUP, TOPIC, MEMBER = "tool-share", "tool-share-topic", "member-1"


@pytest.fixture(scope="module")
def member(broker):
    with WireClient(broker.port) as client:
        create_topic(client, TOPIC, partitions=2)
        joined = client.send(ShareGroupHeartbeatRequest(group_id=GROUP, member_id=MEMBER, member_epoch=0,
                                                        subscribed_topic_names=[TOPIC]), 1)
        assert joined.error_code == 0, joined
        yield client, joined.member_epoch


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
        GROUP, MEMBER, "/127.0.0.1", "ebb-data-test", "2", "1", f"{TOPIC}:0,1"]
    [header, state] = tool("--describe", "--group", GROUP, "--state")
    assert (header, state[0], state[-2:]) == (["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"], GROUP,
                                              ["Stable", "1"])
    refused = " ".join(map(" ".join, tool("--delete", "--group", GROUP)))
    assert f"Share group '{GROUP}' is not EMPTY." in refused
    client, epoch = member
    assert client.send(ShareGroupHeartbeatRequest(group_id=GROUP, member_id=MEMBER, member_epoch=-1), 1).error_code == 0
    deleted = " ".join(map(" ".join, tool("--delete", "--group", GROUP)))
    assert f"Deletion of requested share groups ('{GROUP}') was successful." in deleted, deleted
    assert [GROUP] not in tool("--list")
