"""Version negotiation logic: what the client picks given what a broker advertises."""

import pytest

from client.errors import UnsupportedVersionError
from client.versions import (
    CLIENT_VERSIONS,
    api_versions_retry,
    broker_max,
    pick_version,
)
from protocol.enums import ApiKey


def test_picks_the_lower_of_the_two_maximums():
    assert pick_version(ApiKey.DELETE_RECORDS, {ApiKey.DELETE_RECORDS: (0, 2)}) == 2
    picked = pick_version(ApiKey.DELETE_RECORDS, {ApiKey.DELETE_RECORDS: (0, 9)})
    assert picked == CLIENT_VERSIONS[ApiKey.DELETE_RECORDS][1] == 3


def test_caller_bounds_narrow_our_range():
    broker = {ApiKey.DELETE_RECORDS: (0, 3)}
    assert pick_version(ApiKey.DELETE_RECORDS, broker, high=2) == 2
    assert pick_version(ApiKey.DELETE_RECORDS, broker, low=3) == 3
    with pytest.raises(UnsupportedVersionError, match="v0-2"):
        pick_version(ApiKey.DELETE_RECORDS, {ApiKey.DELETE_RECORDS: (0, 2)}, low=3)


def test_api_not_advertised():
    with pytest.raises(UnsupportedVersionError, match="does not offer DeleteRecords") as info:
        pick_version(ApiKey.DELETE_RECORDS, {})
    assert info.value.error_code == 35


def test_ranges_that_do_not_meet():
    with pytest.raises(UnsupportedVersionError):
        pick_version(ApiKey.PRODUCE, {ApiKey.PRODUCE: (13, 13)})  # topic ids only; we address topics by name


def test_client_caps():
    assert CLIENT_VERSIONS[ApiKey.PRODUCE][1] == 12
    assert CLIENT_VERSIONS[ApiKey.FETCH][1] == 12
    assert CLIENT_VERSIONS[ApiKey.METADATA][0] == 1  # v0 reads [] as "all topics"
    assert CLIENT_VERSIONS[ApiKey.API_VERSIONS] == (0, 3)


def test_broker_max():
    assert broker_max(ApiKey.DELETE_RECORDS, {ApiKey.DELETE_RECORDS: (0, 2)}) == 2
    assert broker_max(ApiKey.DELETE_RECORDS, {}) is None


@pytest.mark.parametrize(("advertised", "expected"), [
    ([(18, 0, 2)], 2),         # the broker reads up to v2
    ([(18, 0, 4)], 3),         # it reads more than we speak: our max
    ([(3, 0, 12)], 0),         # no ApiVersions entry: v0 is what every broker reads
    ([], 0),
])
def test_api_versions_retry(advertised, expected):
    assert api_versions_retry(advertised) == expected
