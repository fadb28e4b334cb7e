"""Hold a broker's log load for as long as a test wants, without a test-only branch in the broker.

The load reads the log dir's clean-shutdown marker first. A FIFO in its place makes that read wait:
opening it waits for a writer, and reading then waits until the writer closes. The test opens the
writing end once the broker waits on the other (`held`), and closing it (`release`) gives the broker
an empty marker, which it takes as an unclean stop, as after SIGKILL (a marker is absent then anyway).

    with HeldLoad(broker.data_dir / "logs") as load:
        broker.launch()
        wait_for(load.held, what="the broker loading its logs")
        ...  # the broker is between opening its metadata store and loading its logs
        load.release()
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

from broker.log.checkpoint import CLEAN_SHUTDOWN_FILE
from tests.support.broker_process import BrokerProcess


class HeldLoad:
    def __init__(self, log_dir: Path) -> None:
        self.marker = log_dir / CLEAN_SHUTDOWN_FILE
        self._fd: int | None = None

    def __enter__(self) -> HeldLoad:
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        self.marker.unlink(missing_ok=True)
        os.mkfifo(self.marker)
        return self

    def held(self) -> bool:
        """Whether the broker now waits at the marker (our end opens only once it does: ENXIO before,
        and after `release` once the broker has read it, or ENOENT once it has removed it)."""
        if self._fd is None and self.marker.is_fifo():  # a file there is the broker's own marker, written since
            try:
                self._fd = os.open(self.marker, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno not in (errno.ENXIO, errno.ENOENT):
                    raise
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def end(self, process: BrokerProcess) -> None:
        """After the test, passed or failed: a broker still held goes on loading and is waited for; one
        that has not reached the marker yet is killed (tests/cluster/three_brokers.py's `restore` starts
        it again)."""
        if self.held():
            self.release()
            process.wait_started()
        elif self.marker.is_fifo() and process.process is not None and process.process.poll() is None:
            process.stop(signal.SIGKILL)

    def __exit__(self, *exc) -> None:
        self.release()
        if self.marker.is_fifo():
            self.marker.unlink()
