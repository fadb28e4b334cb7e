"""Test helpers shared by the client tests."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def broker_available() -> bool:
    """True once the broker package can be started (`python -m broker`)."""
    return (REPO / "broker" / "__main__.py").exists()


needs_broker = pytest.mark.skipif(not broker_available(), reason="the Ebb broker (broker/__main__.py) is not there yet")
