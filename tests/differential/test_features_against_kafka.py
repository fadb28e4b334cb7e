"""Apache Kafka 4.3.1 and Ebb answer UpdateFeatures (key 57) the same way at v0, v1 and v2, for the
features both serve (transaction.version, group.version) and for names neither knows: validate-only and real
changes, a level outside the supported range, below 0, a downgrade asked as an upgrade and the
reverse, an unknown upgrade type, an empty request; after each real change ApiVersions lists the new
finalized level (compared on the transaction.version and group.version entries: Kafka lists KRaft
features Ebb does not serve, broker/features.py). With group.version at 0 both still advertise
ConsumerGroupHeartbeat and ConsumerGroupDescribe and answer them UNSUPPORTED_VERSION; raised again,
a consumer joins. Error messages are compared word for word (`kafka-features` prints
them); FinalizedFeaturesEpoch is each cluster's own (Kafka's metadata offset, Ebb's node version),
so only its rise after a change is checked."""

from __future__ import annotations

import pytest

from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    FindCoordinatorRequest,
    UpdateFeaturesRequest,
)
from tests.differential.runner import Peer, compare
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

TV = "transaction.version"
GV = "group.version"
UPGRADE, SAFE, UNSAFE = 1, 2, 3


def _update(*updates: tuple[str, int, int], validate_only: bool = False, allow_downgrade: bool = False):
    return UpdateFeaturesRequest(timeout_ms=30_000, validate_only=validate_only, feature_updates=[
        UpdateFeaturesRequest.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind,
                                               allow_downgrade=allow_downgrade)
        for name, level, kind in updates])


def _finalized(peer: Peer, feature: str = TV) -> tuple[int, int]:
    answer = peer.send(ApiVersionsRequest(client_software_name="ebb-diff", client_software_version="1"), 3)
    level = next((f.max_version_level for f in answer.finalized_features if f.name == feature), 0)
    return level, answer.finalized_features_epoch


def _record_level(peer: Peer, label: str, level: int, epoch_before: int, feature: str = TV) -> int:
    """Wait until the broker lists `level` (Kafka's brokers follow the controller's log), then record it."""
    wait_for(lambda: _finalized(peer, feature)[0] == level, timeout_s=30,
             what=f"{peer.name}: {feature} finalized at {level}")
    found, epoch = _finalized(peer, feature)
    assert epoch > epoch_before, f"{peer.name}: the epoch did not rise ({epoch_before} -> {epoch})"
    peer.record(label, ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=[], finalized_features=[
        ApiVersionsResponse.FinalizedFeatureKey(name=feature, min_version_level=found, max_version_level=found)]))
    return epoch


def _record_group_apis(peer: Peer, label: str) -> None:
    """ApiVersions v4's entries for the KIP-848 APIs and group.version (Kafka lists features Ebb lacks)."""
    answer = peer.send(ApiVersionsRequest(client_software_name="ebb-diff", client_software_version="1"), 4)
    peer.record(label, ApiVersionsResponse(
        error_code=answer.error_code,
        api_keys=[k for k in answer.api_keys
                  if k.api_key in (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)],
        supported_features=[f for f in answer.supported_features if f.name == GV],
        finalized_features=[f for f in answer.finalized_features if f.name == GV]))


def _join(group: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(group_id=group, member_id="ebb-diff-member-0000001", member_epoch=0,
                                         rebalance_timeout_ms=30_000, subscribed_topic_names=["gv-absent"],
                                         topic_partitions=[])


def refusals(peer: Peer) -> None:
    for version in (0, 1, 2):
        v = f"v{version}"
        peer.ask(f"{v}: upgrade to 3", _update((TV, 3, UPGRADE)), version)
        peer.ask(f"{v}: level -1", _update((TV, -1, UPGRADE)), version)
        peer.ask(f"{v}: downgrade to 1 as an upgrade", _update((TV, 1, UPGRADE)), version)
        peer.ask(f"{v}: unknown feature", _update(("no.such.feature", 1, UPGRADE)), version)
        peer.ask(f"{v}: unknown feature at 0", _update(("no.such.feature", 0, UPGRADE)), version)
        peer.ask(f"{v}: empty", _update(), version)
        peer.ask(f"{v}: the current level", _update((TV, 2, UPGRADE)), version)
        peer.ask(f"{v}: two features, the second refused",
                 _update((TV, 2, UPGRADE), ("no.such.feature", 1, UPGRADE)), version)
    peer.ask("v0: AllowDowngrade to 1", _update((TV, 1, UPGRADE), allow_downgrade=True), 0)
    for version in (1, 2):
        v = f"v{version}"
        peer.ask(f"{v}: unknown upgrade type", _update((TV, 1, 7)), version)
        peer.ask(f"{v}: upgrade to 3 as a downgrade", _update((TV, 3, SAFE)), version)
        peer.ask(f"{v}: validate a safe downgrade to 1", _update((TV, 1, SAFE), validate_only=True), version)
        peer.ask(f"{v}: validate an unsafe downgrade to 1", _update((TV, 1, UNSAFE), validate_only=True), version)
        peer.ask(f"{v}: validate disabling", _update((TV, 0, UNSAFE), validate_only=True), version)
        for first, second in (((TV, 3, UPGRADE), ("no.such.feature", 1, UPGRADE)),
                              (("no.such.feature", 1, UPGRADE), (TV, 3, UPGRADE))):
            peer.ask(f"{v}: two refused features, {first[0]} first", _update(first, second), version)
        peer.ask(f"{v}: one feature twice, the last entry counts",
                 _update((TV, 3, UPGRADE), (TV, 2, UPGRADE), validate_only=True), version)
        peer.ask(f"{v}: validate disabling an unknown feature",
                 _update(("no.such.feature", 0, SAFE), validate_only=True), version)


def changes(peer: Peer) -> None:
    level, epoch = _finalized(peer)
    assert level == 2
    peer.ask("v1: safe downgrade to 1", _update((TV, 1, SAFE)), 1)
    epoch = _record_level(peer, "after the downgrade", 1, epoch)
    peer.ask("v2: upgrade to 2 as a downgrade", _update((TV, 2, SAFE)), 2)
    peer.ask("v2: validate an upgrade to 2", _update((TV, 2, UPGRADE), validate_only=True), 2)
    peer.ask("v2: upgrade to 2", _update((TV, 2, UPGRADE)), 2)
    epoch = _record_level(peer, "after the upgrade", 2, epoch)
    peer.ask("v0: upgrade to 2 again", _update((TV, 2, UPGRADE)), 0)
    peer.ask("v2: unsafe downgrade to 1", _update((TV, 1, UNSAFE)), 2)
    epoch = _record_level(peer, "after the unsafe downgrade", 1, epoch)
    peer.ask("v0: upgrade to 2", _update((TV, 2, UPGRADE)), 0)
    _record_level(peer, "after the v0 upgrade", 2, epoch)


def group_version(peer: Peer) -> None:
    level, epoch = _finalized(peer, GV)
    assert level == 1  # a new cluster's, as Kafka 4.3.1 formats one
    _record_group_apis(peer, "at group.version 1")
    peer.ask("gv: upgrade to 2", _update((GV, 2, UPGRADE)), 1)
    peer.ask("gv: disable as an upgrade", _update((GV, 0, UPGRADE)), 1)
    peer.ask("gv: validate disabling", _update((GV, 0, SAFE), validate_only=True), 1)
    peer.ask("gv: disable", _update((GV, 0, SAFE)), 1)
    wait_for(lambda: _finalized(peer, GV)[0] == 0, timeout_s=30, what=f"{peer.name}: {GV} disabled")
    _record_group_apis(peer, "at group.version 0")
    for version in (0, 1):
        peer.ask(f"v{version}: heartbeat at group.version 0", _join("gv-group"), version)
        peer.ask(f"v{version}: describe at group.version 0",
                 ConsumerGroupDescribeRequest(group_ids=["gv-group", ""], include_authorized_operations=True), version)
    peer.ask("gv: upgrade to 1 as a downgrade", _update((GV, 1, SAFE)), 2)
    peer.ask("gv: upgrade to 1", _update((GV, 1, UPGRADE)), 2)
    _record_level(peer, "after the group.version upgrade", 1, epoch, GV)
    wait_for(lambda: peer.send(FindCoordinatorRequest(key_type=0, coordinator_keys=["gv-group"]), 4)
             .coordinators[0].error_code == 0, timeout_s=60, what=f"{peer.name} coordinates gv-group")
    loading = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    answer = wait_for(lambda: (a := peer.send(_join("gv-group"), 1)).error_code not in loading and a,
                      timeout_s=60, what=f"{peer.name} loaded gv-group")
    peer.record("v1: a consumer joins at group.version 1 (error, epoch)", type(answer)(
        error_code=answer.error_code, member_epoch=answer.member_epoch))


SCENARIOS = [refusals, changes, group_version]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_same_update_features_answers_as_kafka(scenario, ebb_peer, kafka_peer):
    found = compare(scenario, ebb_peer, kafka_peer, {})
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


def test_same_refusal_words_as_kafka(ebb_peer, kafka_peer):
    """`kafka-features` prints the message: word for word the same (both brokers are node 1)."""
    asked = [_update((TV, 3, UPGRADE)), _update((TV, -1, UPGRADE)), _update((TV, 1, UPGRADE)),
             _update((TV, 3, UPGRADE), ("no.such.feature", 1, UPGRADE)),
             _update(("no.such.feature", 1, UPGRADE), (TV, 3, UPGRADE), ("a.feature", 1, UPGRADE)),
             _update(("no.such.feature", 1, UPGRADE)), _update(("no.such.feature", 0, SAFE)),
             _update((TV, 1, 7)), _update((TV, 3, SAFE)), _update((GV, 2, UPGRADE)), _update((GV, 0, UPGRADE))]
    for request in asked:
        ours, theirs = (peer.send(request, 2) for peer in (ebb_peer, kafka_peer))
        assert (ours.error_code, ours.error_message) == (theirs.error_code, theirs.error_message)
