"""The whole suite runs with the kept Fetch resolve checked (broker/handlers/fetch_resolve.py): every
reuse of a connection's kept resolve is compared with a full resolve, in this process and in the
brokers the tests start (they inherit the environment); a difference fails the test that made it."""

import os

os.environ["EBB_TEST_CHECK_KEPT_RESOLVE"] = "1"  # before any broker module is imported

import dataclasses  # noqa: E402

import pytest  # noqa: E402
import structlog  # noqa: E402
from hypothesis import settings  # noqa: E402

from broker.handlers import fetch_resolve  # noqa: E402
from tests.differential.runner import TALLY  # noqa: E402

# No per-example deadline for any test (Hypothesis' default is 200 ms; this is the one place that says so):
# examples here start brokers and write files, and make test runs two workers on two cores, where an
# example's time says what the other worker does, not what the example does.
settings.register_profile("ebb", deadline=None)
settings.load_profile("ebb")


@pytest.fixture(autouse=True)
def _structlog_defaults():
    """Each test starts from structlog's defaults: code a test runs in this process may configure it (the
    pipeline's readers quiet the client's logs to warnings), and a later test's capture_logs would then
    miss info events. Which tests ran before in the same process depends on how xdist shared them out."""
    structlog.reset_defaults()


@pytest.fixture(autouse=True)
def _no_kept_resolve_mismatch():
    before = fetch_resolve.mismatches
    yield
    assert fetch_resolve.mismatches == before, fetch_resolve.MISMATCH


def _worker_unit(nodeid: str) -> str:
    """What one xdist worker runs whole (make test runs two): a module, so that its module-scoped brokers start
    once and its tests keep their order, and tests/pipeline as one, so that its Spark session starts once."""
    module = nodeid.split("::", 1)[0]
    return "tests/pipeline" if module.startswith("tests/pipeline/") else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _worker_unit(nodeid)

    config.option.loadscopereorder = False  # collection order: the many short unit modules last, to even out the end
    return ByModule(config, log)


# The differential tests' tally (tests/differential/runner.py): each xdist worker hands its own to the
# controller, which adds them up and prints the sum (without xdist, this process's own).
def pytest_sessionfinish(session):
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:
        worker_output["differential_tally"] = dataclasses.asdict(TALLY)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    for field, count in getattr(node, "workeroutput", {}).get("differential_tally", {}).items():
        setattr(TALLY, field, getattr(TALLY, field) + count)


def pytest_terminal_summary(terminalreporter) -> None:
    if TALLY.pairs:
        terminalreporter.write_line(
            f"Kafka as the judge: {TALLY.scenarios} scenarios, {TALLY.pairs} request/answer pairs: "
            f"{TALLY.equal} equal, {TALLY.allowed} with allowed differences only, {TALLY.differing} differing")
