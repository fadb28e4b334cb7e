"""protocol/, broker/ and client/ stay clean under mypy (the configuration is pyproject.toml's [tool.mypy])."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_protocol_broker_and_client_type_check():
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"
