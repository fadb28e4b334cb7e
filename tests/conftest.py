"""The whole suite runs with the kept Fetch resolve checked (broker/handlers/fetch_resolve.py): every
reuse of a connection's kept resolve is compared with a full resolve, in this process and in the
brokers the tests start (they inherit the environment); a difference fails the test that made it."""

import os

os.environ["EBB_TEST_CHECK_KEPT_RESOLVE"] = "1"  # before any broker module is imported

import pytest  # noqa: E402

from broker.handlers import fetch_resolve  # noqa: E402


@pytest.fixture(autouse=True)
def _no_kept_resolve_mismatch():
    before = fetch_resolve.mismatches
    yield
    assert fetch_resolve.mismatches == before, fetch_resolve.MISMATCH
