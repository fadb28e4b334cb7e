"""bench/damon.py on a copy of DAMON's sysfs layout: which kdamonds count (running, with a pageout
scheme), the bytes their pageout schemes applied once told to update their stats, and a pause that
turns them back on however the run ends; bench/goals.py's columns of those bytes."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from bench import goals
from bench.damon import Damon


def kdamond(root: Path, name: str, state: str, schemes: dict[str, int]) -> Path:
    """A kdamond directory with one context and a scheme per (action, sz_applied)."""
    directory = root / name
    (directory / "contexts" / "0" / "schemes").mkdir(parents=True)
    (directory / "state").write_text(f"{state}\n")
    for index, (action, applied) in enumerate(schemes.items()):
        scheme = directory / "contexts" / "0" / "schemes" / str(index)
        (scheme / "stats").mkdir(parents=True)
        (scheme / "action").write_text(f"{action}\n")
        (scheme / "stats" / "sz_applied").write_text(f"{applied}\n")
    return directory


def test_only_running_kdamonds_with_a_pageout_scheme_count(tmp_path):
    kdamond(tmp_path, "0", "on", {"pageout": 4096, "stat": 99})
    kdamond(tmp_path, "1", "off", {"pageout": 8192})
    kdamond(tmp_path, "2", "on", {"lru_prio": 5})
    kdamond(tmp_path, "10", "on", {"pageout": 1 << 20})
    damon = Damon.find(tmp_path)
    assert damon.names == "0, 10"
    assert damon.pageout_bytes() == 4096 + (1 << 20)
    # the stats are read once the kdamond was told to refresh them
    assert (tmp_path / "0" / "state").read_text() == "update_schemes_stats"
    assert (tmp_path / "1" / "state").read_text() == "off\n"


def test_no_damon(tmp_path):
    damon = Damon.find(tmp_path / "missing")
    assert damon.kdamonds == [] and damon.pageout_bytes() == 0
    with damon.paused():
        pass


def test_stats_that_cannot_be_refreshed_are_not_guessed(tmp_path):
    directory = kdamond(tmp_path, "0", "on", {"pageout": 4096})
    damon = Damon.find(tmp_path)
    (directory / "state").unlink()
    (directory / "state").mkdir()  # not writable, as for a user other than root (root writes any file)
    assert damon.pageout_bytes() is None


@pytest.mark.parametrize("ending", [RuntimeError, KeyboardInterrupt, "SIGTERM", "SIGHUP"])
def test_a_pause_turns_the_kdamonds_back_on_however_the_run_ends(tmp_path, ending, capsys):
    """SIGHUP (the terminal closed) killed the run with DAMON left off for the machine."""
    kdamond(tmp_path, "0", "on", {"pageout": 1})
    kdamond(tmp_path, "1", "on", {"pageout": 2})
    damon = Damon.find(tmp_path)
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGHUP)}
    with pytest.raises(SystemExit if isinstance(ending, str) else ending):
        with damon.paused():
            assert [(tmp_path / n / "state").read_text() for n in "01"] == ["off", "off"]
            if isinstance(ending, str):
                signal.raise_signal(getattr(signal, ending))
                raise AssertionError(f"{ending} did not end the block")
            raise ending()
    assert [(tmp_path / n / "state").read_text() for n in "01"] == ["on", "on"]
    assert {signum: signal.getsignal(signum) for signum in before} == before
    out = capsys.readouterr().out
    assert "kdamond 0, 1 turned off for the run" in out and "kdamond 1 turned back on" in out
    # what to type should the run be killed where nothing can turn them back on (SIGKILL)
    assert f"echo on > {tmp_path / '0' / 'state'}; echo on > {tmp_path / '1' / 'state'}" in out


@pytest.fixture
def default_sigint():
    """Ctrl-C raises KeyboardInterrupt, whatever an earlier test in this process left: a closed uvloop loop
    that handled SIGINT (broker.app.run) stays its handler, and a Ctrl-C then does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("written", ["off", "on"])
def test_ctrl_c_while_kdamonds_are_turned_off_or_on_waits_until_each_is_done(tmp_path, written, monkeypatch,
                                                                           default_sigint):
    """Ctrl-C just after kdamond 0 took "off" (before it was noted as turned off), or a second Ctrl-C
    while the first were turned back on, left kdamonds off for the machine."""
    kdamond(tmp_path, "0", "on", {"pageout": 1})
    kdamond(tmp_path, "1", "on", {"pageout": 2})
    damon = Damon.find(tmp_path)
    write_text = Path.write_text

    def interrupted(path, text, *args, **kwargs):
        done = write_text(path, text, *args, **kwargs)
        if text == written and path == tmp_path / "0" / "state":
            signal.raise_signal(signal.SIGINT)
        return done

    monkeypatch.setattr(Path, "write_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        with damon.paused():
            if written == "on":
                raise KeyboardInterrupt  # the first Ctrl-C
            raise AssertionError("the Ctrl-C while turning off did not end the run")
    assert [(tmp_path / n / "state").read_text() for n in "01"] == ["on", "on"]


def test_nothing_to_pause_says_nothing(tmp_path, capsys):
    """It said "kdamond  turned off for the run", with no name, after "nothing to pause"."""
    with Damon.find(tmp_path).paused():
        pass
    assert capsys.readouterr().out == ""


def test_kdamonds_that_cannot_be_read_are_told_apart_from_none(tmp_path):
    """Not root: the state files (mode 0600) cannot be read, and the run said nothing ran, nothing to pause."""
    unreadable = kdamond(tmp_path, "0", "on", {"pageout": 1})
    (unreadable / "state").unlink()
    (unreadable / "state").mkdir()  # unreadable, as for a user other than root
    damon = Damon.find(tmp_path)
    assert damon.kdamonds == [] and damon.unreadable == [unreadable]
    for pause in (False, True):
        note = goals.damon_note(damon, pause, counted=False)
        assert note is not None and "kdamond 0 cannot be read (not root)" in note
        assert ("pauses nothing" in note) == pause
    assert goals.damon_note(Damon.find(tmp_path / "missing"), True, False) == (
        "--pause-damon: no DAMON kdamond with a pageout scheme is running, nothing to pause")
    assert goals.damon_note(Damon.find(tmp_path / "missing"), False, False) is None


def test_a_kdamond_that_cannot_be_turned_off_stops_the_run_and_the_others_go_back_on(tmp_path):
    kdamond(tmp_path, "0", "on", {"pageout": 1})
    blocked = kdamond(tmp_path, "1", "on", {"pageout": 2})
    damon = Damon.find(tmp_path)
    (blocked / "state").unlink()
    (blocked / "state").mkdir()  # not writable, as for a user other than root
    with pytest.raises(OSError), damon.paused():
        raise AssertionError("the run went on with DAMON still on")
    assert (tmp_path / "0" / "state").read_text() == "on"


class Pages:
    """A DAMON whose pageout figure grows by `step` bytes each time it is read."""

    def __init__(self, step: int) -> None:
        self.step, self.total = step, 0

    def pageout_bytes(self) -> int:
        self.total += self.step
        return self.total


def test_each_step_of_a_run_counts_the_bytes_paged_out_meanwhile(monkeypatch):
    broker = type("Broker", (), {"bootstrap": "b:1", "cpu_split": lambda self: (1.0, 1.0)})()
    for name in ("create_topic", "drop_page_cache", "delete_topic"):
        monkeypatch.setattr(goals, name, lambda *args: None)
    monkeypatch.setitem(goals.TOOLS, "fake", (lambda *args: 100.0, lambda *args: 200.0))
    runner = goals.Runner({"fake": 1000}, Pages(5_000_000))
    out = runner.one(broker, "fake", 1, "1")
    assert out["produce"][0] == 100.0 and out["produce"][5] == 5_000_000 and out["consume"][5] == 5_000_000
    assert goals.Runner({"fake": 1000}).one(broker, "fake", 1, "1")["consume"][5] is None


def test_the_pageout_column():
    ebb = [(0, 0, 0, 0, 0, 2_000_000), (0, 0, 0, 0, 0, 6_000_000), (0, 0, 0, 0, 0, None)]
    kafka = [(0, 0, 0, 0, 0, None)] * 3
    assert goals._pageout_mb(ebb, kafka, 5) == "4 / ?"
