"""Start a real broker process on loopback for a test, and stop it.

    with BrokerProcess(tmp_path) as broker:
        client.connect(broker.bootstrap)       # "127.0.0.1:<port>"
        broker.restart(signal.SIGKILL)         # unclean stop, same data dir and port

The broker runs as `python -m broker` with Kafka property overrides; its log goes to
<data_dir>/broker.log so a failing test can show it.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from broker.handlers import fetch_resolve

START_TIMEOUT_S = 30.0


_HANDED_OUT: set[int] = set()

# Under pytest-xdist (make test runs two workers) each worker keeps to its own share of the ports, so that
# one worker never hands out a port the other holds or is about to bind again (a restart on the same port).
# The kernel gives bind(0) odd ports only, so the share is taken on port // 2.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)


def free_port() -> int:
    """A loopback port nothing listens on, never one this process handed out before: the kernel may give the
    same free port to two binds in a row, and a node asking for two ports (Kafka's broker and controller
    listeners) then fails to start."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT and (port // 2) % _WORKERS == _WORKER:
            _HANDED_OUT.add(port)
            return port


class BrokerProcess:
    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None, port: int | None = None,
                 open_files_limit: int | None = None):
        self.data_dir = Path(data_dir)
        self.open_files_limit = open_files_limit  # soft and hard RLIMIT_NOFILE of the process, if set
        self.port = port or free_port()
        self.overrides = {
            "node.id": "1",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir / "logs"),
            **(overrides or {}),
        }
        self.process: subprocess.Popen | None = None
        self._log_start = 0  # where this run's log lines begin (launch)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.log"

    def start(self) -> BrokerProcess:
        self.launch()
        return self.wait_started()

    def launch(self) -> None:
        """Start the process without waiting for it: `wait_started` then waits, so that several brokers
        start side by side (tests/cluster/three_brokers.py)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0  # this run's lines follow
        args = [sys.executable, "-m", "broker"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ},
                                        preexec_fn=self._limit_open_files if self.open_files_limit else None)
        log.close()

    def wait_started(self) -> BrokerProcess:
        """Until the broker serves: its port accepts a moment before (connections wait until every service
        has started, broker/app.py), so its "broker started" line of this run is what says so."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{self.log_text()}")
            if self._started_line_written():
                return self
            time.sleep(0.05)
        self.stop(signal.SIGKILL)
        raise RuntimeError(f"broker did not start within {START_TIMEOUT_S}s:\n{self.log_text()}")

    def _started_line_written(self) -> bool:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                return b'"event": "broker started"' in log.read()
        except OSError:
            return False

    def _limit_open_files(self) -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files_limit, self.open_files_limit))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._check_kept_resolve()
        return code

    def _check_kept_resolve(self) -> None:
        """The broker's test-only check of its kept Fetch resolves (tests/conftest.py) found none wrong."""
        try:
            with open(self.log_path, "rb") as log:
                found = fetch_resolve.MISMATCH.encode() in log.read()
        except OSError:
            return
        assert not found, f"{fetch_resolve.MISMATCH}: see {self.log_path}"

    def restart(self, sig: int = signal.SIGTERM) -> BrokerProcess:
        self.stop(sig)
        return self.start()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()



def with_plain_sasl_listener(process: BrokerProcess, jaas: str, more: dict[str, str]) -> BrokerProcess:
    """`process` with a SASL_PLAINTEXT listener on `process.sasl_port` beside its PLAINTEXT one, PLAIN
    users from `jaas`, and the `more` properties."""
    sasl_port = free_port()
    process.sasl_port = sasl_port  # type: ignore[attr-defined]
    process.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        **more,
    })
    return process
