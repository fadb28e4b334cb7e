"""`ebb ...` run as a real process: the installed console script, or the module when it is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_SCRIPT = Path(sys.executable).parent / "ebb"
EBB = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "broker.cli"]


def ebb(*args, stdin: str | None = None, **options) -> subprocess.CompletedProcess:
    return subprocess.run([*EBB, *map(str, args)], capture_output=True, text=True, input=stdin, timeout=120,
                          **options)
