"""delete_records against fixture brokers that advertise chosen DeleteRecords versions.

The unsupported-version rule: against a broker without v3, leader_only=True fails each partition
with UNSUPPORTED_VERSION and sends nothing; leader_only=False uses v2 and reports -1 for the leader
log start offset. Also: one request per leader broker, and retries after a leadership change.
"""

import pytest

from client import Admin, TopicPartition
from protocol.enums import ConfigSource
from protocol.errors import ErrorCode
from protocol.messages import AlterConfigsResponse
from tests.client.fixture_broker import FixtureCluster, delete_records

DELETE_RECORDS = 21


async def test_leader_only_against_v2_broker_fails_every_partition_and_sends_nothing():
    async with FixtureCluster({1: {21: (0, 2)}}, topics={"t": {0: 1, 1: 1}, "u": {0: 1}}) as fixture:
        async with Admin(fixture.bootstrap) as admin:
            deleted = await admin.delete_records({("t", 0): 5, ("t", 1): -1, ("u", 0): 3}, leader_only=True)
            results = deleted.partition_results()
    assert set(results) == {("t", 0), ("t", 1), ("u", 0)}
    for result in results.values():
        assert result.error == ErrorCode.UNSUPPORTED_VERSION
        assert (result.low_watermark, result.leader_log_start_offset) == (-1, -1)
        assert "up to v2; leader-only needs v3" in result.error_message
    assert fixture.seen(DELETE_RECORDS) == []  # never silently downgraded


async def test_without_leader_only_a_v2_broker_is_asked_with_v2():
    async with FixtureCluster({1: {21: (0, 2)}}, topics={"t": {0: 1, 1: 1}}, high_watermark=42) as fixture:
        async with Admin(fixture.bootstrap) as admin:
            results = (await admin.delete_records({("t", 0): 5, ("t", 1): -1}, timeout_ms=1234)).partition_results()
    (seen,) = fixture.seen(DELETE_RECORDS)
    assert seen.api_version == 2 and seen.body.timeout_ms == 1234
    assert results[TopicPartition("t", 0)].low_watermark == 5
    assert results[("t", 1)].low_watermark == 42
    for result in results.values():
        assert result.ok and result.leader_log_start_offset == -1


async def test_without_any_delete_records_support():
    async with FixtureCluster({1: {}}) as fixture:
        fixture.brokers[1].api_versions.pop(21)
        async with Admin(fixture.bootstrap) as admin:
            for leader_only in (False, True):
                results = (await admin.delete_records({("t", 0): 1}, leader_only=leader_only)).partition_results()
                assert results[("t", 0)].error == ErrorCode.UNSUPPORTED_VERSION
    assert fixture.seen(DELETE_RECORDS) == []


@pytest.mark.parametrize("leader_only", [True, False])
async def test_v3_broker_gets_v3_and_reports_the_leader_log_start_offset(leader_only):
    async with FixtureCluster({1: {21: (0, 3)}}, topics={"t": {0: 1}}) as fixture:
        async with Admin(fixture.bootstrap) as admin:
            results = (await admin.delete_records({("t", 0): 7}, leader_only=leader_only)).partition_results()
    (seen,) = fixture.seen(DELETE_RECORDS)
    assert seen.api_version == 3 and seen.body.leader_only is leader_only
    assert results[("t", 0)].ok
    assert results[("t", 0)].leader_log_start_offset == 7


async def test_results_follow_the_kips_admin_api():
    """partition_results() is the name; low_watermarks() is its deprecated alias (KIP-1343)."""
    async with FixtureCluster({1: {21: (0, 3)}}, topics={"t": {0: 1}}) as fixture:
        async with Admin(fixture.bootstrap) as admin:
            result = await admin.delete_records({("t", 0): 3}, leader_only=True)
    (deleted,) = result.partition_results().values()
    assert (deleted.low_watermark, deleted.leader_log_start_offset, deleted.error) == (3, 3, ErrorCode.NONE)
    with pytest.warns(DeprecationWarning, match="partition_results"):
        assert result.low_watermarks() == result.partition_results()
    assert result.failed() == {}


async def test_one_request_per_leader_and_mixed_support():
    topics = {"t": {0: 1, 1: 2, 2: 1, 3: 2}}
    async with FixtureCluster({1: {21: (0, 3)}, 2: {21: (0, 2)}}, topics=topics) as fixture:
        async with Admin(fixture.bootstrap) as admin:
            offsets = {("t", p): 10 + p for p in range(4)}
            plain = (await admin.delete_records(offsets)).partition_results()
            per_node = sorted((s.node_id, s.api_version, sorted(p.partition_index for p in s.body.topics[0].partitions))
                              for s in fixture.seen(DELETE_RECORDS))
            assert per_node == [(1, 3, [0, 2]), (2, 2, [1, 3])]
            assert {tp: r.low_watermark for tp, r in plain.items()} == offsets
            assert [plain[("t", p)].leader_log_start_offset for p in range(4)] == [10, -1, 12, -1]

            fixture.requests.clear()
            leader_only = (await admin.delete_records(offsets, leader_only=True)).partition_results()
            assert [(s.node_id, s.api_version) for s in fixture.seen(DELETE_RECORDS)] == [(1, 3)]
            assert [leader_only[("t", p)].error for p in range(4)] == [
                ErrorCode.NONE, ErrorCode.UNSUPPORTED_VERSION, ErrorCode.NONE, ErrorCode.UNSUPPORTED_VERSION]


async def test_unknown_topics_and_partitions_fail_without_a_request():
    async with FixtureCluster(topics={"t": {0: 1}}) as fixture:
        async with Admin(fixture.bootstrap) as admin:
            results = (await admin.delete_records({("t", 0): 1, ("t", 5): 1, ("nope", 0): 1})).partition_results()
    assert results[("t", 0)].ok
    assert results[("t", 5)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "has no partition 5" in results[("t", 5)].error_message
    assert results[("nope", 0)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    (seen,) = fixture.seen(DELETE_RECORDS)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in seen.body.topics] == [("t", [0])]


async def test_not_leader_refreshes_metadata_and_retries_at_the_new_leader():
    async with FixtureCluster({1: {}, 2: {}}, topics={"t": {0: 1}}) as fixture:
        async def moved_leader(broker, request):
            fixture.topics["t"][0] = 2  # leadership moves while the request is in flight
            return await delete_records(broker, request)

        async with Admin(fixture.bootstrap, retry_backoff_ms=10) as admin:
            fixture.handlers[DELETE_RECORDS] = moved_leader
            results = (await admin.delete_records({("t", 0): 4})).partition_results()
    assert [s.node_id for s in fixture.seen(DELETE_RECORDS)] == [1, 2]
    assert results[("t", 0)].ok and results[("t", 0)].low_watermark == 4


async def test_gives_up_with_the_last_error_at_the_deadline():
    async with FixtureCluster(topics={"t": {0: 1}}) as fixture:
        fixture.topics["t"][0] = 9  # a leader that is not among the brokers
        async with Admin(fixture.bootstrap, retry_backoff_ms=10, request_timeout_ms=300) as admin:
            results = (await admin.delete_records({("t", 0): 4}, timeout_ms=0)).partition_results()
    assert results[("t", 0)].error == ErrorCode.LEADER_NOT_AVAILABLE
    assert "gave up" in results[("t", 0)].error_message
    assert fixture.seen(DELETE_RECORDS) == []


async def test_rejects_negative_offsets_before_sending():
    async with FixtureCluster() as fixture:
        async with Admin(fixture.bootstrap) as admin:
            with pytest.raises(ValueError, match="offset -2 for t-0"):
                await admin.delete_records({("t", 0): -2})
    assert fixture.seen(DELETE_RECORDS) == []


async def test_alter_configs_falls_back_to_legacy_alter_configs_with_current_values_kept():
    async with FixtureCluster({1: {}}) as fixture:
        fixture.brokers[1].api_versions.pop(44)
        fixture.configs["t"] = {
            "retention.ms": ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
            "segment.ms": ("99", ConfigSource.DYNAMIC_TOPIC_CONFIG),
            "cleanup.policy": ("delete", ConfigSource.DEFAULT_CONFIG),
        }

        async def accept(broker, request):
            resource = request.body.resources[0]
            return AlterConfigsResponse(responses=[AlterConfigsResponse.AlterConfigsResourceResponse(
                resource_type=resource.resource_type, resource_name=resource.resource_name)])

        fixture.handlers[33] = accept
        async with Admin(fixture.bootstrap) as admin:
            await admin.alter_configs("t", {"max.message.bytes": "2048"}, deletes=["segment.ms"])
    (seen,) = fixture.seen(33)
    sent = {c.name: c.value for c in seen.body.resources[0].configs}
    assert sent == {"retention.ms": "1000", "max.message.bytes": "2048"}
    assert fixture.seen(44) == []
