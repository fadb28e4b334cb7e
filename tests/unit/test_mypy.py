"""protocol/, broker/ and client/ stay clean under mypy (the configuration is pyproject.toml's [tool.mypy]),
and so do the unit tests that build services from typed fakes (tests/unit/fakes.py): mypy holds each
fake to the Protocol or constructor type the production code declares."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "tests" / "unit"
# Tests whose fakes stand in for services; with every test that imports the shared fakes.
FAKE_BUILT = ("test_controller_with_fakes.py", "test_coordinator_partitions.py", "test_delayed_operations.py",
              "test_describe_log_dirs_failed.py", "test_dynamic_unclean_election.py", "test_leader_balance.py",
              "test_list_transactions_loading.py", "test_metrics_parts.py", "test_replication_throttle.py",
              "test_store_failures_answered.py", "test_txn_coordinator_background.py",
              "test_txn_marker_connections.py")


def _mypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_protocol_broker_and_client_type_check():
    result = _mypy()
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"


def test_the_tests_built_from_fakes_type_check():
    """Their bodies too (unannotated test functions are checked), and no `type: ignore` left unneeded;
    what they import is checked by the test above, not here."""
    importing = {path.name for path in UNIT.glob("test_*.py") if "tests.unit.fakes" in path.read_text()}
    files = sorted(str(UNIT / name) for name in {"fakes.py", "leading_broker.py", *FAKE_BUILT, *importing})
    result = _mypy("--check-untyped-defs", "--follow-imports=silent", "--warn-unused-ignores", *files)
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"
