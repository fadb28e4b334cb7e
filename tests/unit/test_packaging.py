"""A non-editable install (the Docker image) carries every package: pyproject's package discovery
finds each directory of the project's code that has an __init__.py."""

import re
import subprocess
import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_is_installed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    found = set(find_packages(str(ROOT), include=config["include"]))
    expected = {".".join(p.parent.relative_to(ROOT).parts) for top in ("protocol", "schemas", "broker", "client",
                                                                        "pipeline")
                for p in (ROOT / top).rglob("__init__.py") if "__pycache__" not in p.parts}
    assert expected <= found
    assert {"broker.log", "broker.cluster", "client.cli", "pipeline.jobs"} <= found


def test_make_run_installs_the_runtime_dependencies_only(tmp_path):
    """Issue 27: `make run` on a fresh clone installs the project without extras and no system package
    (what `make -n` would run for a venv that does not exist yet)."""
    plan = subprocess.run(["make", "--no-print-directory", "-n", "run", f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    installed = {what.strip() for what in re.findall(r"pip (?:--python \S+ )?install -q ([^;&\n]+)", plan)}
    assert installed == {"pip -e .", "-e ."}  # the host's pip installing pip too, or the venv's own
    assert "apt-get" not in plan and "-m broker " in plan
