"""ApiVersions (key 18), versions 0-4.

Lists every registered handler with its version range, and from v3 the features (broker/features.py):
SupportedFeatures (ranges starting at 0 from v4 only), FinalizedFeatures (levels above 0) and
FinalizedFeaturesEpoch, as Kafka's ApiVersionsResponse lists them. A request newer than v4 is answered in the v0
layout with UNSUPPORTED_VERSION and our own ApiVersions range, so the client retries at a version we
speak (KIP-511); the body of such a request is never parsed. v3+ requests must name the client
software in Kafka's allowed characters, else INVALID_REQUEST.

Errors: NONE, UNSUPPORTED_VERSION, INVALID_REQUEST.
"""

from __future__ import annotations

import re

from broker.handlers import REGISTRY, handles
from broker.handlers.context import BrokerContext
from broker.request_context import RequestContext
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse

API_KEY = ApiKey.API_VERSIONS
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def advertised(broker: BrokerContext) -> list:
    entries = []
    for key, handler in sorted(REGISTRY.items()):
        high = handler.versions.high
        if key == 21 and not broker.config.delete_records_v3_enable:
            high = min(high, 2)
        entries.append(ApiVersionsResponse.ApiVersion(api_key=key, min_version=handler.advertised_min,
                                                      max_version=high))
    return entries


def unsupported_version_reply() -> ApiVersionsResponse:
    own = REGISTRY[API_KEY]
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=API_KEY, min_version=own.advertised_min,
                                       max_version=own.versions.high)])


@handles(API_KEY, "0-4", reply_to_newer=unsupported_version_reply)
async def api_versions(broker: BrokerContext, request: Request[ApiVersionsRequest],
                       connection: RequestContext) -> ApiVersionsResponse:
    body = request.body
    if request.api_version >= 3 and not (
        _SOFTWARE.match(body.client_software_name or "") and _SOFTWARE.match(body.client_software_version or "")
    ):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=advertised(broker))
    answer = ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=advertised(broker))
    if request.api_version >= 3:
        features = broker.features
        answer.supported_features = [
            ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in features.supported(request.api_version).items()]
        answer.finalized_features = [
            ApiVersionsResponse.FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
            for name, level in features.listed().items()]
        answer.finalized_features_epoch = features.epoch
    return answer
