"""Apache Kafka 4.3.1 and Ebb answer UpdateFeatures (key 57) the same way at v0, v1 and v2, for the
feature both serve (transaction.version) and for names neither knows: validate-only and real
changes, a level outside the supported range, below 0, a downgrade asked as an upgrade and the
reverse, an unknown upgrade type, an empty request; after each real change ApiVersions lists the new
finalized level (compared on the transaction.version entries: Kafka lists KRaft features Ebb does not
serve, broker/features.py). Error messages are compared word for word (`kafka-features` prints
them); FinalizedFeaturesEpoch is each cluster's own (Kafka's metadata offset, Ebb's node version),
so only its rise after a change is checked."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse, UpdateFeaturesRequest
from tests.differential.runner import Peer, compare
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

TV = "transaction.version"
UPGRADE, SAFE, UNSAFE = 1, 2, 3


def _update(*updates: tuple[str, int, int], validate_only: bool = False, allow_downgrade: bool = False):
    return UpdateFeaturesRequest(timeout_ms=30_000, validate_only=validate_only, feature_updates=[
        UpdateFeaturesRequest.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind,
                                               allow_downgrade=allow_downgrade)
        for name, level, kind in updates])


def _finalized(peer: Peer) -> tuple[int, int]:
    answer = peer.send(ApiVersionsRequest(client_software_name="ebb-diff", client_software_version="1"), 3)
    level = next((f.max_version_level for f in answer.finalized_features if f.name == TV), 0)
    return level, answer.finalized_features_epoch


def _record_level(peer: Peer, label: str, level: int, epoch_before: int) -> int:
    """Wait until the broker lists `level` (Kafka's brokers follow the controller's log), then record it."""
    wait_for(lambda: _finalized(peer)[0] == level, timeout_s=30, what=f"{peer.name}: {TV} finalized at {level}")
    found, epoch = _finalized(peer)
    assert epoch > epoch_before, f"{peer.name}: the epoch did not rise ({epoch_before} -> {epoch})"
    peer.record(label, ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=[], finalized_features=[
        ApiVersionsResponse.FinalizedFeatureKey(name=TV, min_version_level=found, max_version_level=found)]))
    return epoch


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


SCENARIOS = [refusals, changes]


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
             _update((TV, 1, 7)), _update((TV, 3, SAFE))]
    for request in asked:
        ours, theirs = (peer.send(request, 2) for peer in (ebb_peer, kafka_peer))
        assert (ours.error_code, ours.error_message) == (theirs.error_code, theirs.error_message)
