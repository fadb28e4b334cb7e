"""Which API versions the client speaks, and how it picks one against what a broker advertises.

The client speaks every version the codec covers, with a few caps where a newer version would change
how we address things: Produce v13 and Fetch v13+ name topics by id only, and this client works by
name. Metadata starts at v1 because v0 reads an empty topic list as "all topics".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from protocol.enums import ApiKey
from protocol.messages import APIS

from .errors import UnsupportedVersionError

# The version the handshake starts with; a broker that knows only older ones says so (KIP-511).
API_VERSIONS_FIRST_TRY = 3

_CAPS: dict[int, tuple[int | None, int | None]] = {  # api key -> (min, max) tighter than the codec's
    ApiKey.PRODUCE: (None, 12),
    ApiKey.FETCH: (None, 12),
    ApiKey.METADATA: (1, None),
    ApiKey.API_VERSIONS: (None, API_VERSIONS_FIRST_TRY),
}


def _client_ranges() -> dict[int, tuple[int, int]]:
    ranges = {}
    for key, api in APIS.items():
        low, high = api.versions.low, api.versions.high
        cap_low, cap_high = _CAPS.get(key, (None, None))
        ranges[key] = (max(low, cap_low) if cap_low is not None else low,
                       min(high, cap_high) if cap_high is not None else high)
    return ranges


CLIENT_VERSIONS: dict[int, tuple[int, int]] = _client_ranges()

BrokerVersions = Mapping[int, tuple[int, int]]


def api_name(api_key: int) -> str:
    api = APIS.get(api_key)
    return api.name if api else f"api key {api_key}"


def pick_version(api_key: int, broker: BrokerVersions, *, low: int | None = None, high: int | None = None,
                 ours: BrokerVersions = CLIENT_VERSIONS) -> int:
    """The highest version both sides accept, optionally held within [low, high] by the caller.

    Raises UnsupportedVersionError when the broker does not advertise the API or the ranges do not meet.
    """
    if api_key not in broker:
        raise UnsupportedVersionError(f"the broker does not offer {api_name(api_key)}")
    if api_key not in ours:
        raise UnsupportedVersionError(f"this client does not speak {api_name(api_key)}")
    our_low, our_high = ours[api_key]
    if low is not None:
        our_low = max(our_low, low)
    if high is not None:
        our_high = min(our_high, high)
    broker_low, broker_high = broker[api_key]
    version = min(our_high, broker_high)
    if version < max(our_low, broker_low):
        raise UnsupportedVersionError(
            f"{api_name(api_key)}: the broker offers v{broker_low}-{broker_high}, we need v{our_low}-{our_high}"
        )
    return version


def broker_max(api_key: int, broker: BrokerVersions) -> int | None:
    """The broker's highest version of an API, or None if it does not advertise it."""
    found = broker.get(api_key)
    return found[1] if found else None


def api_versions_retry(advertised: Iterable[tuple[int, int, int]]) -> int:
    """The ApiVersions version to retry with after UNSUPPORTED_VERSION.

    The error response lists (at least) the broker's own ApiVersions range; with no such entry the
    only safe choice is v0, which every broker reads.
    """
    for api_key, low, high in advertised:
        if api_key == ApiKey.API_VERSIONS:
            try:
                return pick_version(ApiKey.API_VERSIONS, {ApiKey.API_VERSIONS: (low, high)})
            except UnsupportedVersionError:
                return 0
    return 0
