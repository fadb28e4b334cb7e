"""A non-editable install (the Docker image) carries every package: pyproject's package discovery
finds each directory of the project's code that has an __init__.py."""

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
