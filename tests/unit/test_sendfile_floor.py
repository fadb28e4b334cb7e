"""bench/sendfile_floor.c, the kernel's floor under a consume: it serves every byte of its files in
answers of --fetch bytes per partition, the same in each send mode, refuses what it does not know,
and bench/floor.py reads its figures back."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from bench import floor

SOURCE = Path(__file__).resolve().parents[2] / "bench" / "sendfile_floor.c"


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("floor") / "sendfile_floor"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(SOURCE), "-lpthread"], check=True)
    return out


def _run(program: Path, tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(program), "--dir", str(tmp_path), *options], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mode", ["sendfile", "splice", "copy"])
def test_every_byte_is_served_in_answers_of_fetch_bytes_per_partition(program: Path, tmp_path: Path,
                                                                     mode: str) -> None:
    # 3 partitions of 1,000,000 bytes in answers of 300,000 per partition: 4 answers, the last short
    done = _run(program, tmp_path, "--bytes", "3000000", "--partitions", "3", "--fetch", "300000", "--reps", "2",
                "--mode", mode, "--chunk", "65536", "--cork")
    assert done.returncode == 0, done.stderr
    reps = re.findall(r"rep=\d+ bytes=(\d+) .* answers=(\d+) sender_switches=\d+\+\d+", done.stdout)
    assert reps == [("3000000", "4"), ("3000000", "4")]
    assert "summary: mb_s=" in done.stdout
    assert list(tmp_path.iterdir()) == []  # the files are gone


def test_socket_options_and_a_parsing_reader(program: Path, tmp_path: Path) -> None:
    done = _run(program, tmp_path, "--bytes", "2000000", "--partitions", "2", "--cc", "reno", "--sndbuf", "131072",
                "--rcvbuf", "262144", "--lowat", "65536", "--think-us-per-mb", "100", "--reps", "1")
    assert done.returncode == 0, done.stderr
    assert "rep=0 bytes=2000000 " in done.stdout


@pytest.mark.parametrize("options", [["--mode", "mmap"], ["--partitions", "0"], ["--nonsense", "1"], ["--bytes"]])
def test_what_it_does_not_know_is_refused(program: Path, tmp_path: Path, options: list[str]) -> None:
    done = _run(program, tmp_path, *options)
    assert done.returncode == 2
    assert done.stdout == ""


def test_bench_floor_reads_its_figures(program: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(floor, "FLOOR", program)
    runs = floor.floor_run(tmp_path, 2, 2_000_000, ("--cc", "reno"), 0, ["--fetch", "100000"], reps=3)
    assert len(runs) == 3
    for mb_s, user, system in runs:
        assert mb_s > 0 and user >= 0 and system >= 0
