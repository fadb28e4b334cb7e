"""Fixtures for tests/interop: Kafka's own Java client and tools against a real Ebb broker process.

The jars are Kafka 4.3.1 as pinned in tests/interop/java/pom.xml; `mvn -q -B package` there (the
Makefile's stamp, or the `java` fixture when the stamp is missing or older than the sources) copies
them to java/target/lib and compiles the Interop driver (java/src/main/java/ebb/interop) to
java/target/classes. Without Java or Maven the tests fail; they never skip.

Two ways to drive Java, each one JVM per call:
- `java.interop(bootstrap, prefix, *suites)` runs Interop's suites (admin, groups, producer,
  consumer, streams); every step prints a JSON line of what the client saw, and the tests judge those lines;
- `java.tool(bootstrap, ToolClass, *args)` runs one of Kafka's command-line tools as
  `java -cp <jars> <ToolClass> --bootstrap-server <bootstrap> <args>`, as the kafka-*.sh scripts do.

Each test module gets its own broker; when it stops, its log must show no failed handler.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess

JAVA_DIR = Path(__file__).resolve().parent / "java"
TARGET = JAVA_DIR / "target"
BUILT = TARGET / ".built"  # the Makefile's stamp too
KAFKA_VERSION = "4.3.1"
# A broker log line that means a request reached a broken code path (broker/server.py)
BROKER_FAILURES = ("handler failed", "response encoding failed", "Traceback")


def _sources() -> list[Path]:
    return [JAVA_DIR / "pom.xml", *sorted((JAVA_DIR / "src").rglob("*.java"))]


def build() -> None:
    """Compile the driver and fetch the jars unless the stamp is newer than every source."""
    if BUILT.exists() and BUILT.stat().st_mtime >= max(p.stat().st_mtime for p in _sources()):
        return
    for program in ("java", "mvn"):
        if shutil.which(program) is None:
            pytest.fail(f"`{program}` is not on PATH: tests/interop needs Java 17 and Maven (make test installs them)")
    result = subprocess.run(["mvn", "-q", "-B", "package"], cwd=JAVA_DIR, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        pytest.fail(f"mvn package failed in {JAVA_DIR}:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}")
    BUILT.touch()


class Steps(dict):
    """Interop's JSON lines by step name (a name printed twice keeps its last line), and its stderr."""

    stderr: str = ""

    def ok(self, name: str) -> dict:
        assert name in self, f"step {name!r} printed nothing; steps: {list(self)}"
        line = self[name]
        assert "error" not in line, f"step {name!r} failed in the Java client: {line['error']}"
        return line


@dataclass
class ToolRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        """Non-empty stdout lines, trailing blanks removed."""
        return [line.rstrip() for line in self.stdout.splitlines() if line.strip()]


@dataclass
class Java:
    classpath: str

    def command(self, main: str, *args: str, properties: dict[str, str] | None = None) -> list[str]:
        # C1 only: these JVMs live seconds, so start-up matters more than peak speed. What the
        # clients log at WARN and above goes to stderr (slf4j-simple).
        return ["java", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                *(f"-D{k}={v}" for k, v in (properties or {}).items()), "-cp", self.classpath, main, *args]

    def run(self, main: str, *args: str, timeout: float = 180,
            properties: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(main, *args, properties=properties), capture_output=True, text=True,
                              timeout=timeout)

    def start(self, bootstrap: str, suite: str, stderr, properties: dict[str, str] | None = None) -> subprocess.Popen:
        """Interop's `suite` in a JVM left running: its JSON lines on the pipe `stdout`, its standard
        input a pipe (closing it ends suites that wait on it), stderr to the file `stderr`."""
        command = self.command("ebb.interop.Interop", bootstrap, "-", suite, properties=properties)
        return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)

    def interop(self, bootstrap: str, prefix: str, *suites: str, replication: int = 1,
                properties: dict[str, str] | None = None) -> Steps:
        """Run the suites; `replication`: the replication factor of the topics they create;
        `properties`: more system properties for the suites."""
        result = self.run("ebb.interop.Interop", bootstrap, prefix, *suites,
                          properties={"ebb.interop.replication": str(replication), **(properties or {})})
        steps = Steps()
        steps.stderr = result.stderr
        for line in result.stdout.splitlines():
            if line.startswith("{"):
                entry = json.loads(line)
                steps[entry["step"]] = entry
        assert result.returncode == 0 and "done" in steps, (
            f"Interop {' '.join(suites)} exited {result.returncode}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
        return steps

    def tool(self, bootstrap: str, main: str, *args: str) -> ToolRun:
        result = self.run(main, "--bootstrap-server", bootstrap, *args)
        return ToolRun(result.returncode, result.stdout, result.stderr)


@pytest.fixture(scope="session")
def java() -> Java:
    build()
    return Java(f"{TARGET / 'classes'}:{TARGET / 'lib'}/*")


@pytest.fixture(scope="module")
def broker(tmp_path_factory, request):
    """One Ebb broker for the module (with the module's BROKER_OVERRIDES, if it has them); its log must
    show no failed handler when the module ends."""
    process = BrokerProcess(tmp_path_factory.mktemp("broker"), getattr(request.module, "BROKER_OVERRIDES", None))
    process.start()
    request.node.interop_broker = process
    try:
        yield process
    finally:
        process.stop()
    log = process.log_path.read_text(errors="replace")
    failures = [line for line in log.splitlines() if any(mark in line for mark in BROKER_FAILURES)]
    assert not failures, "the broker logged failures:\n" + "\n".join(failures[:20])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the tail of the broker's log to a failing test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    process = getattr(item.parent, "interop_broker", None)
    if process is not None:
        report.sections.append(("broker log (tail)", process.log_text()))
