"""UpdateFeatures (key 57), versions 0-2 (KIP-584; v1 KIP-778's UpgradeType and ValidateOnly; v2
answers without per-feature results).

`kafka-features upgrade | downgrade [--unsafe] | disable [--dry-run]` and Admin.updateFeatures. The
controller checks and writes the levels (broker/feature_updates.py, Kafka's checks); a broker that is
not the controller forwards the request to it (handlers/controller_requests.py), and every broker
follows `/feature` (broker/features.py). v0's AllowDowngrade is not read, as Kafka 4.3.1's controller
reads only UpgradeType (absent in v0, so an upgrade).

Answers, as Kafka's: a refused request carries the top-level code and message and no per-feature
result; an accepted one at v0-1 lists every asked feature with NONE (and the message "NONE", Kafka's
name of the code), at v2 nothing. ALTER on CLUSTER
missing: CLUSTER_AUTHORIZATION_FAILED. TimeoutMs bounds only a forward to the controller.

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED, INVALID_UPDATE_VERSION, FEATURE_UPDATE_FAILED,
NOT_CONTROLLER, and the metadata store's failures (broker/cluster/store.py).
"""

from __future__ import annotations

from broker.feature_updates import FeatureUpdate
from broker.handlers import BrokerContext, handles
from broker.handlers.controller_requests import cluster_allowed, on_the_controller
from broker.request_context import RequestContext
from protocol.enums import ApiKey, Operation, UpgradeType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import UpdateFeaturesRequest, UpdateFeaturesResponse

API_KEY = ApiKey.UPDATE_FEATURES
_Result = UpdateFeaturesResponse.UpdatableFeatureResult


@handles(API_KEY, "0-2")
async def update_features_handler(broker: BrokerContext, request: Request[UpdateFeaturesRequest],
                                  connection: RequestContext) -> UpdateFeaturesResponse:
    body, version = request.body, request.api_version
    if not cluster_allowed(broker, request, connection, Operation.ALTER):
        return _answer(body, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    updates = [FeatureUpdate(u.feature, u.max_version_level, u.upgrade_type if version >= 1 else UpgradeType.UPGRADE)
               for u in body.feature_updates]
    validate_only = version >= 1 and body.validate_only

    async def run() -> UpdateFeaturesResponse:
        code, message = await broker.feature_updates.update(updates, validate_only)
        return _answer(body, version, code, message)

    return await on_the_controller(broker, request, run,
                                   lambda code, message: _answer(body, version, code, message))


def _answer(body: UpdateFeaturesRequest, version: int, code: ErrorCode, message: str | None) -> UpdateFeaturesResponse:
    results = [_Result(feature=u.feature, error_code=ErrorCode.NONE, error_message=ErrorCode.NONE.name)
               for u in body.feature_updates] if code == ErrorCode.NONE and version <= 1 else []
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=code, error_message=message, results=results)
