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


class Damon:
    def __init__(self, kdamonds: list[Path]) -> None:
        self.kdamonds = kdamonds  # the kdamonds found running, by their sysfs directories

    @classmethod
    def find(cls, root: Path = KDAMONDS) -> Damon:
        """The kdamonds running under `root` that have a pageout scheme, as far as this user can read."""
        running = []
        for kdamond in sorted(root.glob("[0-9]*"), key=lambda path: int(path.name)):
            try:
                on = (kdamond / "state").read_text().strip() == "on"
            except OSError:
                continue
            if on and any(_pageout_schemes(kdamond)):
                running.append(kdamond)
        return cls(running)

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
        the run is interrupted (Ctrl-C, or SIGTERM, turned into SystemExit meanwhile). A kdamond that
        cannot be turned off (not root) raises PermissionError before the block runs."""
        previous = signal.signal(signal.SIGTERM, _exit)
        stopped: list[Path] = []
        try:
            for kdamond in self.kdamonds:
                (kdamond / "state").write_text("off")
                stopped.append(kdamond)
            print(f"DAMON: kdamond {self.names} turned off for the run", flush=True)
            yield
        finally:
            for kdamond in stopped:  # each one tried: a kdamond left off stays off for the whole machine
                try:
                    (kdamond / "state").write_text("on")
                    print(f"DAMON: kdamond {kdamond.name} turned back on", flush=True)
                except OSError as exc:
                    print(f"DAMON: kdamond {kdamond} not turned back on ({exc}); by hand: echo on > "
                          f"{kdamond / 'state'}", file=sys.stderr, flush=True)
            signal.signal(signal.SIGTERM, previous)


def _pageout_schemes(kdamond: Path) -> Iterator[Path]:
    for scheme in sorted(kdamond.glob("contexts/[0-9]*/schemes/[0-9]*")):
        with contextlib.suppress(OSError):
            if (scheme / "action").read_text().strip() == "pageout":
                yield scheme


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
