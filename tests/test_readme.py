"""README.md's quick start, run as written: its first block (`make run`) starts the broker, and the
blocks after it run in order in one shell from the repository's root, a Python block fed to the
`python` of that shell, as a reader pastes them. Only the broker's address differs, a free port in
place of 127.0.0.1:9092 (a test must not take a port a developer's broker may hold), and the data
goes to a temporary dir (`make run ARGS=...`, the way the README gives for extra settings)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

from tests.support.broker_process import free_port

ROOT = Path(__file__).resolve().parents[1]
README_ADDRESS = "127.0.0.1:9092"
START_TIMEOUT_S = 120.0  # make run may first install the project into .venv
PYTHON_END = "README_PYTHON_BLOCK"


def quick_start_blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block of the Quick start section, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```(\w*)\n(.*?)^```$", section, flags=re.S | re.M)


def as_one_shell_script(blocks: list[tuple[str, str]], address: str) -> str:
    parts = []
    for language, text in blocks:
        text = text.replace(README_ADDRESS, address)
        if language == "sh":
            parts.append(text)
        elif language == "python":
            assert PYTHON_END not in text
            parts.append(f"python - <<'{PYTHON_END}'\n{text}{PYTHON_END}\n")
        else:
            raise AssertionError(f"a quick-start block in {language or 'no language'}: say sh or python")
    return "".join(parts)


class MakeRun:
    """`make run` in its own process group; its output drained by a thread that flags the broker's
    "listening" line."""

    def __init__(self, port: int, data_dir: Path):
        args = f"--override listeners=PLAINTEXT://127.0.0.1:{port} --override log.dirs={data_dir}"
        self.process = subprocess.Popen(["make", "--no-print-directory", "run", f"ARGS={args}"], cwd=ROOT,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)
        self.lines: list[str] = []
        self.events: list[dict] = []
        self.listening = threading.Event()
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if line.startswith("{"):
                event = json.loads(line)
                self.events.append(event)
                if event.get("event") == "listening":
                    self.listening.set()
        self.listening.set()  # the output ended: make run stopped

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(30)
        self.reader.join(30)


def test_the_quick_start_runs_as_written(tmp_path):
    blocks = quick_start_blocks()
    assert blocks[0] == ("sh", "make run\n"), "the quick start begins with make run"
    port = free_port()
    broker = MakeRun(port, tmp_path / "data")
    try:
        assert broker.listening.wait(START_TIMEOUT_S) and broker.process.poll() is None, "".join(broker.lines)
        shell = subprocess.run(["bash", "-e", "-c", as_one_shell_script(blocks[1:], f"127.0.0.1:{port}")],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        broker.stop()
    assert shell.returncode == 0, shell.stdout + shell.stderr
    # What the README's comments promise.
    assert "(5, 10)\n" in shell.stdout
    partition_0 = re.findall(r"^demo\s+0\s+(\d+)\s+(\d+)\s+-$", shell.stdout, flags=re.M)
    assert partition_0 == [("5", "10"), ("10", "10")], shell.stdout
    # A new data dir is no crash (issue 27), and the broker stopped cleanly.
    started = [e for e in broker.events if e.get("event") == "broker started"]
    assert [(e.get("new_log_dir"), "clean_shutdown" in e) for e in started] == [(True, False)]
    assert any(e.get("event") == "broker stopped" for e in broker.events), "".join(broker.lines)


def test_readme_and_docs_point_only_inside_the_repository():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    problems = []
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)#\s]+)[^)]*\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            resolved = (page.parent / target).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                problems.append(f"{page.name}: link {target}")
        problems += [f"{page.name}: {path}" for path in re.findall(r"`(\.\./[^`]*)`", text)]
    assert problems == []
