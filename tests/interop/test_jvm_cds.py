"""The class archives of the tests' JVMs (tests/support/jvm_cds.py) on a real JVM: the first JVM of a
kind writes one, the next maps it, and a tool prints the same either way and without one."""

from __future__ import annotations

import subprocess

from tests.interop.conftest import JVM
from tests.support import jvm_cds

MAIN = "org.apache.kafka.tools.TopicCommand"  # `kafka-topics.sh --version`: no broker needed


def test_a_tool_prints_the_same_while_writing_mapping_and_without_an_archive(java, tmp_path, monkeypatch):
    monkeypatch.setattr(jvm_cds, "ARCHIVES", tmp_path)
    writing = java.run(MAIN, "--version")
    [archive] = tmp_path.iterdir()  # kept once the JVM ended, under the kind's name
    assert archive == java.sharing(MAIN, write=False).archive
    mapping = java.run(MAIN, "--version")
    plain = subprocess.run(["java", *JVM, "-cp", java.classpath, MAIN, "--version"], capture_output=True, text=True,
                           timeout=120)
    assert writing.returncode == mapping.returncode == plain.returncode == 0
    assert writing.stdout == mapping.stdout == plain.stdout and "4.3.1" in plain.stdout
    assert writing.stderr == mapping.stderr == plain.stderr
    # -Xshare:on fails a JVM that cannot map its archive (another class path, a broken file)
    command = java.command(MAIN, "--version")
    assert f"-XX:SharedArchiveFile={archive}" in command
    strict = subprocess.run([command[0], "-Xshare:on", *command[1:]], capture_output=True, text=True, timeout=120)
    assert strict.returncode == 0 and strict.stdout == plain.stdout, strict.stderr
