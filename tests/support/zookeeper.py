"""A real standalone ZooKeeper server on loopback for tests (Debian's `zookeeper` package, 3.8).

    with ZooKeeperServer(tmp_path) as zk:
        zk.connect                  # "127.0.0.1:<port>"
        zk.stop(); zk.start()       # same port and data: a ZooKeeper restart

The server runs `org.apache.zookeeper.server.ZooKeeperServerMain` with a generated zoo.cfg, a small
JVM heap and a short tick (so tests may ask for session timeouts of a few seconds; ZooKeeper allows
2 to 20 ticks by default, here up to 60 s). Its log goes to <data_dir>/zookeeper.log. `make test`
installs the package when it is missing (Makefile); without it, tests that need it are skipped with
the command to run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support.broker_process import free_port

START_TIMEOUT_S = 30.0
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")  # its manifest's Class-Path names the other jars
# A logging backend for slf4j, so the server's log says something (optional; the package depends on it).
SLF4J_BACKEND = Path("/usr/share/java/slf4j-simple.jar")
INSTALL_HINT = "apt-get install -y --no-install-recommends zookeeper"


def available() -> str | None:
    """None when a server can run here, else why not."""
    if shutil.which("java") is None:
        return "no java on PATH"
    if not ZOOKEEPER_JAR.exists():
        return f"{ZOOKEEPER_JAR} missing ({INSTALL_HINT})"
    return None


def four_letter_word(port: int, word: bytes = b"ruok", timeout: float = 1.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


class ZooKeeperServer:
    def __init__(self, data_dir: Path, port: int | None = None, tick_ms: int = 200):
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self.process: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def _write_config(self) -> Path:
        config = self.data_dir / "zoo.cfg"
        config.write_text("\n".join([
            f"tickTime={self.tick_ms}",
            f"dataDir={self.data_dir / 'data'}",
            f"clientPort={self.port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",  # the admin HTTP server would want port 8080
            "4lw.commands.whitelist=ruok,srvr,cons",
            "minSessionTimeout=1000",
            "maxSessionTimeout=60000",
            "autopurge.purgeInterval=0",
            "",
        ]))
        return config

    def start(self) -> ZooKeeperServer:
        reason = available()
        if reason is not None:
            raise RuntimeError(f"cannot run ZooKeeper: {reason}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        classpath = [str(ZOOKEEPER_JAR)] + ([str(SLF4J_BACKEND)] if SLF4J_BACKEND.exists() else [])
        args = ["java", "-Xmx256m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dzookeeper.jmx.log4j.disable=true", "-cp", ":".join(classpath),
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)]
        log = open(self.log_path, "ab")
        # Its own process group, so a test run that is interrupted can be cleaned up by id.
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                        env={**os.environ})
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.process.returncode}:\n{self.log_text()}")
            try:
                if four_letter_word(self.port) == b"imok":
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer within {START_TIMEOUT_S}s:\n{self.log_text()}")

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
