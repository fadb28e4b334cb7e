"""Fixtures for tests/interop: Kafka's own Java client and tools against a real Ebb broker process.

The jars are Kafka 4.3.1 as pinned in tests/interop/java/pom.xml; `mvn -q -B package` there (the
Makefile's stamp, or the `java` fixture when the stamp is missing or older than the sources) copies
them to java/target/lib and compiles the Interop driver (java/src/main/java/ebb/interop) to
java/target/classes. Without Java or Maven the tests fail; they never skip.

Two ways to drive Java:
- `java.interop(bootstrap, prefix, *suites)` runs Interop's suites (admin, groups, producer,
  consumer, streams) in a JVM of their own; every step prints a JSON line of what the client saw, and
  the tests judge those lines;
- `java.tool(bootstrap, ToolClass, *args)` runs one of Kafka's command-line tools with
  `--bootstrap-server <bootstrap> <args>`, as the kafka-*.sh scripts do, but in a JVM kept per broker
  for the test module (java/src/main/java/ebb/interop/ToolRunner.java): a tool's JVM start and class
  loading cost more than most calls themselves, and some modules make a hundred calls. `java.run`
  starts a JVM per call (the perf tools, the console consumer, DumpLogSegments).

Each test module gets its own broker; when it stops, its log must show no failed handler.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from tests.support import jvm_cds
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_node import KafkaNode

JAVA_DIR = Path(__file__).resolve().parent / "java"
TARGET = JAVA_DIR / "target"
BUILT = TARGET / ".built"  # the Makefile's stamp too
DRIVER_JAR = TARGET / "ebb-interop-1.jar"  # the driver as `mvn package` jars it (CDS maps classes from jars only)
# C1 only: these JVMs live seconds, so start-up matters more than peak speed. What the clients log at
# WARN and above goes to stderr (slf4j-simple).
JVM = ["-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
KAFKA_VERSION = "4.3.1"
# A broker log line that means a request reached a broken code path (broker/server.py)
_T = TypeVar("_T")
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
    # ToolRunner JVMs by bootstrap address, started by `tool`: one per broker, so that a client a tool left
    # open (some close none and leave that to the JVM's exit) only ever talks to that broker, and never
    # logs into another broker's calls when its own goes away
    tool_jvms: dict[str, ToolJvm] = field(default_factory=dict, repr=False)

    def command(self, main: str, *args: str, properties: dict[str, str] | None = None,
                sharing: jvm_cds.Sharing | None = None) -> list[str]:
        """`sharing`: the class archive's options (jvm_cds); by default the kind's archive if there is one."""
        sharing = sharing or self.sharing(main, write=False)
        return ["java", *JVM, *sharing.options, *(f"-D{k}={v}" for k, v in (properties or {}).items()),
                "-cp", self.classpath, main, *args]

    def sharing(self, main: str, *, write: bool = True) -> jvm_cds.Sharing:
        return jvm_cds.sharing(JVM, self.classpath, main, write=write)

    def run(self, main: str, *args: str, timeout: float = 180,
            properties: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        sharing = self.sharing(main)
        returncode = None  # a JVM that outlived `timeout` was killed
        try:
            result = subprocess.run(self.command(main, *args, properties=properties, sharing=sharing),
                                    capture_output=True, text=True, timeout=timeout)
            returncode = result.returncode
        finally:
            sharing.keep(returncode)
        return result

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

    def tool(self, bootstrap: str, main: str, *args: str, timeout: float = 180) -> ToolRun:
        jvm = self.tool_jvms.get(bootstrap)
        if jvm is None or not jvm.alive():
            sharing = self.sharing("ebb.interop.ToolRunner")
            jvm = self.tool_jvms[bootstrap] = ToolJvm(self.command("ebb.interop.ToolRunner", sharing=sharing), sharing)
        code, out, err = jvm.call([main, "--bootstrap-server", bootstrap, *args], timeout)
        return ToolRun(code, _own_jvm(out, main), _own_jvm(err, main))

    def close(self) -> None:
        """Ends the tools' JVMs (the next `tool` starts another)."""
        for jvm in self.tool_jvms.values():
            jvm.close()
        self.tool_jvms.clear()


class ToolJvm:
    """One ToolRunner JVM (java/src/main/java/ebb/interop/ToolRunner.java): Kafka's tools called in turn."""

    def __init__(self, command: list[str], sharing: jvm_cds.Sharing):
        self.sharing = sharing
        self.log = tempfile.TemporaryFile()  # its stderr: a file, since nothing reads it while it runs
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        bufsize=0)
        self.pending = b""  # what its stdout gave beyond the last answer read

    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, words: list[str], timeout: float) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of the tool words[0] with the rest as its arguments."""
        assert not any("\n" in word for word in words), "ToolRunner takes one word per line"
        assert self.process.stdin is not None
        self.process.stdin.write(f"{len(words)}\n{''.join(w + chr(10) for w in words)}".encode())
        answer = json.loads(self._answer_line(timeout, words))
        return answer["code"], answer["out"], answer["err"]

    def _answer_line(self, timeout: float, words: list[str]) -> bytes:
        """The answer to the call just sent (a line a thread left over from an earlier call printed is
        passed over); a JVM that hangs past `timeout` or dies fails the call and goes."""
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            line, newline, rest = self.pending.partition(b"\n")
            if newline:
                self.pending = rest
                if line.startswith(b'{"step":"tool"'):
                    return line
                continue
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stdout], [], [], left)[0]:
                self.close()
                raise subprocess.TimeoutExpired(words, timeout)
            chunk = os.read(stdout.fileno(), 1 << 16)
            if not chunk:
                self.log.seek(0)
                tail = self.log.read().decode(errors="replace")[-3000:]
                self.close()
                raise RuntimeError(f"the ToolRunner JVM ended during {words}:\n{tail}")
            self.pending += chunk

    def close(self) -> None:
        if self.alive() and self.sharing.writing is not None:
            # it writes the class archive at its exit: its input's end ends it (tools' threads are daemons)
            assert self.process.stdin is not None
            self.process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(15)
        if self.alive():
            self.process.kill()
        self.process.wait()
        self.sharing.keep(self.process.returncode)
        for pipe in (self.process.stdin, self.process.stdout, self.log):
            if pipe is not None and not pipe.closed:
                pipe.close()


def _own_jvm(printed: str, main: str) -> str:
    """A stack trace as the tool in a JVM of its own prints it: the runner's frames below the tool's
    main (reflection, ToolRunner, the thread) taken out, and the "... N more" of each cause shortened
    by as many, since they are part of the frames it shares with the trace it caused."""
    lines, below_main, runner_frames = [], False, 0
    for line in printed.split("\n"):
        if below_main and line.startswith("\tat "):
            runner_frames += 1
            continue
        below_main = False
        more = re.fullmatch(r"\t\.\.\. (\d+) more", line)
        if more and runner_frames:
            shared = int(more.group(1)) - runner_frames
            if shared <= 0:
                continue
            line = f"\t... {shared} more"
        lines.append(line)
        if line.startswith(f"\tat {main}.main("):
            below_main, runner_frames = True, 0
    return "\n".join(lines)


def on_ebb_and_kafka(tmp_path_factory, play: Callable[[BrokerProcess | KafkaNode, Path], _T],
                     overrides: dict[str, str] | None = None) -> tuple[_T, _T]:
    """`play(server, workdir)` against a fresh Ebb broker and, side by side in a thread, against a fresh
    Kafka node (KRaft, the pinned jars), both started with `overrides`: (Ebb's result, Kafka's). The
    two share nothing but `play`'s code, and the node's start and the plays' waits (throttles,
    metadata catching up) overlap. Both servers have `bootstrap`, `port` and `data_dir`, node id 1."""
    ebb_dir, ebb_run = tmp_path_factory.mktemp("ebb"), tmp_path_factory.mktemp("ebb-run")
    kafka_dir, kafka_run = tmp_path_factory.mktemp("kafka"), tmp_path_factory.mktemp("kafka-run")

    def on_kafka() -> _T:
        with KafkaNode(kafka_dir, f"{TARGET / 'lib'}/*", overrides) as kafka:
            return play(kafka, kafka_run)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        theirs = pool.submit(on_kafka)
        with BrokerProcess(ebb_dir, overrides) as ebb:
            ours = play(ebb, ebb_run)
        return ours, theirs.result()


@pytest.fixture(scope="module")
def java():
    """Per module, so that the tools' JVM (Java.tool) and what calls that ended early left in it
    (a thread parked at its exit) go with the module."""
    build()
    driver = Java(f"{DRIVER_JAR}:{TARGET / 'lib'}/*")
    yield driver
    driver.close()


# What every module's broker starts with, under the module's BROKER_OVERRIDES: a new group's first
# rebalance is not held back (the Kafka nodes here are set so too, tests/support/kafka_node.py), or
# each group the clients form waits out the 3 s default before its members get their partitions
BROKER_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory, request):
    """One Ebb broker for the module (BROKER_DEFAULTS with the module's BROKER_OVERRIDES, if it has them);
    its log must show no failed handler when the module ends."""
    overrides = {**BROKER_DEFAULTS, **getattr(request.module, "BROKER_OVERRIDES", {})}
    process = BrokerProcess(tmp_path_factory.mktemp("broker"), overrides)
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
