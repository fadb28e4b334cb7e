"""The sweep job against a real broker: a dry run changes nothing, --execute deletes exactly the older records."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from pipeline.jobs import sweep
from tests.pipeline.helpers import create_topic, produce
from tests.pipeline.test_loop import log_starts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def logging_as_it_was():
    """sweep.main() sets the process's logging as a command does; later tests get theirs back."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def test_sweep_dry_run_then_execute(bootstrap, capsys):
    create_topic(bootstrap, "sw-a", partitions=2)
    create_topic(bootstrap, "sw-b")
    create_topic(bootstrap, "sw-kept")
    for ts in (1000, 2000, 3000):
        produce(bootstrap, {(t, p): [f"{t}@{ts}".encode()] for t, ps in (("sw-a", 2), ("sw-b", 1), ("sw-kept", 1))
                            for p in range(ps)}, timestamp_ms=ts)

    assert sweep.main(["--bootstrap", bootstrap, "--topics", "sw-[ab]", "--before", "2500"]) == 0
    out = capsys.readouterr().out
    assert "would delete" in out and "dry run: nothing was deleted" in out
    assert [line.split()[:5] for line in out.splitlines() if line.startswith(("sw-", "total"))] == [
        ["sw-a", "2", "0", "4", "4"], ["sw-b", "1", "0", "2", "2"], ["total", "3", "6"]]
    assert log_starts(bootstrap, "sw-a", 2) == {0: 0, 1: 0}

    assert sweep.main(["--bootstrap", bootstrap, "--topics", "sw-[ab]", "--before", "2500", "--execute"]) == 0
    assert log_starts(bootstrap, "sw-a", 2) == {0: 2, 1: 2}
    assert log_starts(bootstrap, "sw-b", 1) == {0: 2}
    assert log_starts(bootstrap, "sw-kept", 1) == {0: 0}
    # a time after every record: everything goes (up to the high watermark), leader-only this time
    assert sweep.main(["--bootstrap", bootstrap, "--topics", "sw-b", "--before", "2030-01-01T00:00:00Z",
                       "--execute", "--leader-only"]) == 0
    assert log_starts(bootstrap, "sw-b", 1) == {0: 3}
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["sw-b", "1", "2", "3", "1"] in rows


def test_sweep_command_line(bootstrap):
    done = subprocess.run([sys.executable, "-m", "pipeline.jobs.sweep", "--bootstrap", bootstrap, "--topics",
                           "sw-none-.*", "--before", "0"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "no topic matches 'sw-none-.*'" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "pipeline.jobs.sweep", "--bootstrap", bootstrap, "--topics", "x",
                          "--before", "yesterday"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "'yesterday' is neither milliseconds" in bad.stderr
