"""A broker stop that hangs says where: each part taking longer than SLOW_STOP_S to stop is logged with
its name and time (broker/app.py), so an operator (or a test's teardown) sees what it waited on."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from broker import app


def test_a_part_slower_than_the_bound_is_logged_and_a_quick_one_is_not(monkeypatch):
    async def run():
        with capture_logs() as logged:
            async with app._timed_stop("quick"):
                pass
            monkeypatch.setattr(app, "SLOW_STOP_S", -1.0)  # any stop is slower than that
            async with app._timed_stop("network"):
                pass
        return logged
    logged = asyncio.run(run())
    assert [(e["event"], e["part"]) for e in logged] == [("a part of the broker was slow to stop", "network")]
    assert logged[0]["log_level"] == "warning"
