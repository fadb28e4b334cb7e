"""The kernel's DAMON proactive reclaim, as the benchmarks see it: is it running, how many bytes of page
cache has it paged out, and a pause for the length of a run.

A kdamond whose scheme's action is `pageout` evicts the page cache of regions it finds cold (on this
project's VM: pages not accessed for a minute, up to 128 MiB a second), segments just written included,
with no reclaim counted in /proc/vmstat. A consume then finds pages missing, and its figures move with
the machine rather than the broker. Its sysfs tree (/sys/kernel/mm/damon/admin/kdamonds/<n>/) is read
and written by root only: elsewhere nothing is found and nothing is paused.

    damon = Damon.find()
    before = damon.pageout_bytes()      # writes update_schemes_stats to each kdamond's state first
    with damon.paused():                # each running kdamond "off", and "on" again on the way out
        ...
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

KDAMONDS = Path("/sys/kernel/mm/damon/admin/kdamonds")


# What a pause blocks while it turns kdamonds off or back on: a signal then (a second Ctrl-C, the
# terminal closing) would leave some off for the whole machine; it is handled once the step is done.
_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


class Damon:
    def __init__(self, kdamonds: list[Path], unreadable: list[Path] | None = None) -> None:
        self.kdamonds = kdamonds  # the kdamonds found running, by their sysfs directories
        # kdamonds whose state this user cannot read (mode 0600: not root), so maybe running
        self.unreadable = unreadable if unreadable is not None else []

    @classmethod
    def find(cls, root: Path = KDAMONDS) -> Damon:
        """The kdamonds running under `root` that have a pageout scheme, and those whose state cannot be
        read (this user is not root)."""
        running, unreadable = [], []
        for kdamond in sorted(root.glob("[0-9]*"), key=lambda path: int(path.name)):
            try:
                on = (kdamond / "state").read_text().strip() == "on"
            except OSError:
                unreadable.append(kdamond)
                continue
            if on and any(_pageout_schemes(kdamond)):
                running.append(kdamond)
        return cls(running, unreadable)

    @property
    def names(self) -> str:
        return ", ".join(kdamond.name for kdamond in self.kdamonds)

    def pageout_bytes(self) -> int | None:
        """Bytes the pageout schemes have paged out so far (sz_applied, once each kdamond has been told to
        update its schemes' stats); None when the stats cannot be updated (not root)."""
        total = 0
        for kdamond in self.kdamonds:
            try:
                (kdamond / "state").write_text("update_schemes_stats")
                total += sum(int((scheme / "stats" / "sz_applied").read_text()) for scheme in _pageout_schemes(kdamond))
            except OSError:
                return None
        return total

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Each running kdamond off for the block and on again after it, also when the block fails or
        the run is interrupted (Ctrl-C, or SIGTERM or SIGHUP, turned into SystemExit meanwhile). A kdamond
        that cannot be turned off (not root) raises PermissionError before the block runs. Nothing to
        pause: nothing is done or printed."""
        if not self.kdamonds:
            yield
            return
        previous = {signum: signal.signal(signum, _exit) for signum in (signal.SIGTERM, signal.SIGHUP)}
        stopped: list[Path] = []
        try:
            with _signals_held():
                for kdamond in self.kdamonds:
                    stopped.append(kdamond)  # first: turned on again even if the write below is cut short
                    try:
                        (kdamond / "state").write_text("off")
                    except OSError:
                        stopped.pop()  # still on
                        raise
            print(f"DAMON: kdamond {self.names} turned off for the run; should the run be killed, turn "
                  f"{'it' if len(stopped) == 1 else 'them'} back on with: "
                  + "; ".join(_turn_on_command(kdamond) for kdamond in stopped), flush=True)
            yield
        finally:
            with _signals_held():
                for kdamond in stopped:  # each one tried: a kdamond left off stays off for the whole machine
                    try:
                        (kdamond / "state").write_text("on")
                        print(f"DAMON: kdamond {kdamond.name} turned back on", flush=True)
                    except OSError as exc:
                        print(f"DAMON: kdamond {kdamond} not turned back on ({exc}); by hand: "
                              f"{_turn_on_command(kdamond)}", file=sys.stderr, flush=True)
                for signum, handler in previous.items():
                    signal.signal(signum, handler)


def _pageout_schemes(kdamond: Path) -> Iterator[Path]:
    for scheme in sorted(kdamond.glob("contexts/[0-9]*/schemes/[0-9]*")):
        with contextlib.suppress(OSError):
            if (scheme / "action").read_text().strip() == "pageout":
                yield scheme


def _turn_on_command(kdamond: Path) -> str:
    return f"echo on > {kdamond / 'state'}"


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is done (then they act as they would have)."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
