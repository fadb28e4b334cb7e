"""The Java Admin on consumer groups (kafka-clients 4.3.1) against Ebb.

A KafkaConsumer joins the group and commits; while it is a member the group is listed, described
and cannot be deleted; after it leaves, the group's offsets are listed, altered and deleted, and the
group is deleted. One JVM runs the `groups` suite of ebb.interop.GroupChecks.
"""

from __future__ import annotations

import pytest

PREFIX = "groups"
TOPIC = f"{PREFIX}-groups"
GROUP = f"{PREFIX}-group"


@pytest.fixture(scope="module")
def steps(java, broker):
    return java.interop(broker.bootstrap, PREFIX, "groups")


def test_member_joins_and_commits(steps):
    line = steps.ok("join_and_commit")
    assert line["read"] == 20
    assert line["assignment"] == [f"{TOPIC}-0", f"{TOPIC}-1"]


def test_list_groups(steps):
    assert steps.ok("list_groups_active")["listing"] == {"state": "STABLE", "type": "CLASSIC", "protocol": "consumer",
                                                         "simple": False}
    assert steps.ok("describe_group_empty")["listing"] == {"state": "EMPTY", "type": "CLASSIC", "protocol": "consumer",
                                                           "simple": False}


def test_describe_group(steps):
    assert steps.ok("describe_group_active")["group"] == {
        "state": "STABLE", "type": "CLASSIC", "assignor": "range", "simple": False, "coordinator": 1,
        "members": [{"client_id": "interop-member", "host": "/127.0.0.1", "assignment": [f"{TOPIC}-0", f"{TOPIC}-1"]}]}
    assert steps.ok("describe_group_empty")["group"] == {
        "state": "EMPTY", "type": "CLASSIC", "assignor": "", "simple": False, "coordinator": 1, "members": []}


def test_a_group_with_members_cannot_be_deleted(steps):
    assert steps.ok("delete_group_active")["raised"] == "GroupNotEmptyException: The group is not empty."


def test_list_alter_and_delete_group_offsets(steps):
    assert steps.ok("list_group_offsets")["offsets"] == {
        f"{TOPIC}-0": {"offset": 6, "metadata": "six"}, f"{TOPIC}-1": {"offset": 3, "metadata": ""}}
    assert steps.ok("alter_group_offsets")["offsets"] == {
        f"{TOPIC}-0": {"offset": 2, "metadata": ""}, f"{TOPIC}-1": {"offset": 3, "metadata": ""}}
    assert steps.ok("delete_group_offsets")["offsets"] == {f"{TOPIC}-0": {"offset": 2, "metadata": ""}}


def test_delete_group(steps):
    line = steps.ok("delete_group")
    assert line["listing"] is None
    assert line["offsets"] == {}
    assert line["again"] == "GroupIdNotFoundException: The group id does not exist."
