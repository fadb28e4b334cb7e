"""Trimming committed records (`retention.committed.groups`, broker/group/trim.py) against a real broker
process, through the wire.

"Nothing moved" is never checked by waiting: a commit that must not trim is sent in the same
OffsetCommit as one to a witness topic that must trim, and the trimmer handles both in one round,
so once the witness has moved the other has been decided.
"""

from __future__ import annotations

import itertools
import signal

import pytest

from protocol.errors import ErrorCode
from protocol.messages import AlterConfigsRequest
from tests.broker.data_wire import WireClient, batch, create_topic, fetch, list_offsets, produce, records
from tests.broker.group_wire import commit, delete_groups, join, leave, sync
from tests.broker.wire_client import create_topic as create_topic_result
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

E = ErrorCode
EARLIEST, LATEST = -2, -1
RECORDS = 10
OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "200",
    "offsets.topic.num.partitions": "3",
    "log.retention.check.interval.ms": "3600000",  # commits and config changes drive the trims here
}
_names = itertools.count()


@pytest.fixture(scope="module")
def broker_overrides():
    return OVERRIDES


def topic_with(client, groups: str | None, *, partitions: int = 1, policy: str = "delete") -> str:
    """A new topic holding RECORDS records in each partition."""
    name = f"trim-{next(_names)}"
    configs = {"cleanup.policy": policy}
    if groups is not None:
        configs["retention.committed.groups"] = groups
    create_topic(client, name, partitions=partitions, configs=configs)
    for p in range(partitions):
        records = batch([b"v%d" % i for i in range(RECORDS)], keys=[b"k%d" % i for i in range(RECORDS)])
        assert produce(client, name, p, records).error_code == E.NONE  # keyed: compacted topics need keys
    return name


def start_of(client, topic: str, partition: int = 0) -> int:
    found = list_offsets(client, topic, partition, EARLIEST)
    assert found.error_code == E.NONE
    return found.offset


def wait_start(client, topic: str, offset: int, partition: int = 0) -> None:
    wait_for(lambda: start_of(client, topic, partition) == offset, what=f"{topic}-{partition} starting at {offset}")


def test_off_by_default_while_a_configured_topic_trims(client):
    plain, trimmed = topic_with(client, None), topic_with(client, "*")
    assert commit(client, "g-off", {(plain, 0): 6, (trimmed, 0): 6}) == {(plain, 0): E.NONE, (trimmed, 0): E.NONE}
    wait_start(client, trimmed, 6)
    assert start_of(client, plain) == 0


def test_every_group_trims_to_the_smallest_commit(client):
    topic = topic_with(client, "*", partitions=2)
    commit(client, "g-a", {(topic, 0): 3, (topic, 1): 4})
    commit(client, "g-b", {(topic, 0): 5, (topic, 1): 9})
    wait_start(client, topic, 3, 0)
    wait_start(client, topic, 4, 1)
    commit(client, "g-a", {(topic, 0): 8})
    wait_start(client, topic, 5, 0)
    # What a consumer sees: below the new start is gone, the rest is intact.
    gone = fetch(client, topic, 0, 4)
    assert gone.error_code == E.OFFSET_OUT_OF_RANGE
    kept = fetch(client, topic, 0, 5)
    assert kept.error_code == E.NONE and kept.log_start_offset == 5
    assert [r.offset for r in records(kept) if r.offset >= 5] == list(range(5, RECORDS))


def test_named_groups_wait_for_each_other(client):
    held, witness = topic_with(client, "n-a,n-b"), topic_with(client, "n-a")
    commit(client, "n-a", {(held, 0): 4, (witness, 0): 4})
    wait_start(client, witness, 4)
    assert start_of(client, held) == 0  # n-b has not committed
    commit(client, "n-other", {(held, 0): 1})  # a group not listed changes nothing
    commit(client, "n-b", {(held, 0): 2})
    wait_start(client, held, 2)


def test_a_live_group_without_a_commit_holds_every_group_trimming_back(client):
    held = topic_with(client, "*")
    witness = topic_with(client, "*")
    member = join(client, "live", topics=(held,), session_ms=30_000)
    assert sync(client, member, {member.member_id: b""}).error_code == E.NONE
    commit(client, "other", {(held, 0): 7, (witness, 0): 7})
    wait_start(client, witness, 7)
    assert start_of(client, held) == 0
    assert commit(client, "live", {(held, 0): 2}, member=member) == {(held, 0): E.NONE}
    wait_start(client, held, 2)
    leave(client, "live", (member.member_id, None))


def test_a_commit_past_the_high_watermark_trims_to_the_high_watermark(client):
    topic = topic_with(client, "*")
    commit(client, "far", {(topic, 0): 1_000})
    wait_start(client, topic, RECORDS)
    assert list_offsets(client, topic, 0, LATEST).offset == RECORDS
    produced = produce(client, topic, 0, batch([b"after"]))
    assert (produced.error_code, produced.base_offset) == (E.NONE, RECORDS)


def test_compacted_topics_are_never_trimmed(client):
    compacted, witness = topic_with(client, "*", policy="compact"), topic_with(client, "*")
    commit(client, "c", {(compacted, 0): 5, (witness, 0): 5})
    wait_start(client, witness, 5)
    assert start_of(client, compacted) == 0


def test_setting_the_config_trims_what_was_already_committed(client):
    topic = topic_with(client, None)
    commit(client, "early", {(topic, 0): 6})
    reply = client.send(AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=topic, configs=[AlterConfigsRequest.AlterConfigsResource.AlterableConfig(
            name="retention.committed.groups", value="early")])], validate_only=False), 2)
    assert reply.responses[0].error_code == E.NONE
    wait_start(client, topic, 6)


@pytest.mark.parametrize("value", ["*,g1", "g1,*"])
def test_every_group_cannot_be_mixed_with_names(client, value):
    result = create_topic_result(client, f"bad-{next(_names)}", 1, {"retention.committed.groups": value})
    assert result.error_code == E.INVALID_CONFIG
    assert "retention.committed.groups" in result.error_message


def test_the_trim_is_durable_across_a_crash(tmp_path):
    with BrokerProcess(tmp_path, OVERRIDES) as process:
        with WireClient(process.port) as c:
            topic = topic_with(c, "*")
            commit(c, "durable", {(topic, 0): 7})
            wait_start(c, topic, 7)
        checkpoint = process.data_dir / "logs" / "log-start-offset-checkpoint"
        wait_for(lambda: f"{topic} 0 7" in checkpoint.read_text().splitlines(), what="the new start on disk")
        process.restart(signal.SIGKILL)
        with WireClient(process.port) as c:
            assert start_of(c, topic) == 7
            assert fetch(c, topic, 0, 6).error_code == E.OFFSET_OUT_OF_RANGE


def test_start_up_trims_what_was_committed_before(tmp_path):
    """Commits made while no topic trimmed; the broker restarts with the broker-wide default set."""
    process = BrokerProcess(tmp_path, OVERRIDES)
    with process:
        with WireClient(process.port) as c:
            topic = topic_with(c, None)
            commit(c, "before", {(topic, 0): 4})
            assert start_of(c, topic) == 0
    process.overrides["log.retention.committed.groups"] = "*"
    with process:
        with WireClient(process.port) as c:
            wait_start(c, topic, 4)


def test_the_periodic_pass_trims_once_a_holding_group_is_gone(tmp_path):
    """Deleting a group or a member leaving signals no commit: the pass every
    log.retention.check.interval.ms sees it."""
    with BrokerProcess(tmp_path, {**OVERRIDES, "log.retention.check.interval.ms": "200"}) as process:
        with WireClient(process.port) as c:
            topic = topic_with(c, "*")
            member = join(c, "holder", topics=(topic,), session_ms=30_000)
            assert sync(c, member, {member.member_id: b""}).error_code == E.NONE
            commit(c, "reader", {(topic, 0): 6})
            commit(c, "stale", {(topic, 0): 2})
            leave(c, "holder", (member.member_id, None))  # no live member without a commit now
            wait_start(c, topic, 2)
            assert delete_groups(c, "stale") == {"stale": E.NONE}
            wait_start(c, topic, 6)

