"""`make cluster`, `make cluster-down` and their image choice (ops/cluster.py), run against a stand-in
`docker` command, as CI has no daemon. The stand-in keeps a daemon's state in a JSON file (running or
not, the images here, the registry's, untagged ones, the volumes, the containers and their health)
and logs every call, so each test checks what ops/cluster.py asked Docker to do and what it told the
user. What it answers is what Debian's docker.io 20.10 and docker-compose 1.29 answered to the same
commands (container ids from `ps -q`, `/name status` from `inspect --format`, `docker system df`'s
sizes); `make cluster-smoke` runs the real thing (docs/cluster.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OFFICIAL = ["python:3.11-slim", "zookeeper:3.8"]
STANDINS = ["ebb-standin/python:3.11", "ebb-standin/zookeeper:3.8"]
LABEL = "--label org.ebb.cluster=make-cluster"
UNTAGGED = ["sha256:" + "ab" * 32, "sha256:" + "cd" * 32]  # what earlier builds of ebb:latest left

FAKE_DOCKER = textwrap.dedent('''\
    #!{python}
    import json, os, sys
    state_path = os.environ["FAKE_DOCKER_STATE"]
    state = json.load(open(state_path))
    args = sys.argv[1:]
    with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
        env = os.environ.get("EBB_BASE_IMAGE", "-") + " " + os.environ.get("ZOOKEEPER_IMAGE", "-")
        builder = " [DOCKER_BUILDKIT=" + os.environ.get("DOCKER_BUILDKIT", "-") + "]"
        log.write(" ".join(args) + (" [env " + env + "]" if args[:1] == ["compose"] else "")
                  + (builder if args[:1] == ["build"] else "") + "\\n")
    def done(code=0, out=""):
        json.dump(state, open(state_path, "w"))
        print(out, end="")
        sys.exit(code)
    if args[0] != "info" and not state["daemon"]:
        done(1)
    if args[0] == "info":
        done(0 if state["daemon"] else 1)
    if args[:2] == ["compose", "up"]:
        state["containers"] = {{"%064x" % n: ["wt_" + name + "_1", state["health"].get(name, "healthy")]
                               for n, name in enumerate(["zookeeper", "broker-1", "broker-2", "broker-3"])}}
        done(0)
    if args[:2] == ["compose", "ps"]:
        done(0, "".join(i + "\\n" for i in state["containers"]))
    if args[0] == "compose":
        state["containers"] = {{}} if "down" in args else state["containers"]
        done(0)
    if args[0] == "inspect":
        done(0, "".join("/%s %s\\n" % tuple(state["containers"][i]) for i in args[3:]))
    if args[0] == "logs":
        done(0, "a broker's last words\\n")
    if args[:2] == ["image", "inspect"]:
        done(0, "1500000000\\n") if args[-1] in state["local"] else done(1)
    if args[:2] == ["image", "ls"]:
        done(0, "".join(i + "\\n" for i in state["untagged"]))
    if args[:2] == ["system", "df"]:
        done(0, "Images\\t1.264GB\\nContainers\\t0B\\nLocal Volumes\\t67.11MB\\nBuild Cache\\t0B\\n")
    if args[0] == "pull":
        if args[1] in state["registry"]:
            state["local"].append(args[1])
            done(0)
        done(1)
    if args[:2] == ["manifest", "inspect"]:
        done(0 if args[2] in state["registry"] else 1)
    if args[0] in ("build", "import"):
        tag = args[args.index("-t") + 1] if "-t" in args else args[-1]
        state["local"].append(tag)
        done(0)
    if args[:2] == ["volume", "ls"]:
        done(0, "".join(v + "\\n" for v in state["volumes"]))
    if args[:2] == ["image", "rm"]:
        state["local"] = [i for i in state["local"] if i not in args[3:]]
        state["untagged"] = [i for i in state["untagged"] if i not in args[3:]]
        done(0)
    if args[:2] == ["volume", "rm"]:
        state["volumes"] = [v for v in state["volumes"] if v not in args[2:]]
        done(0)
    done(2)
''')


class FakeDocker:
    def __init__(self, tmp_path: Path, **state) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        script = self.bin / "docker"
        script.write_text(FAKE_DOCKER.format(python=sys.executable))
        script.chmod(0o755)
        self.state_path, self.log_path = tmp_path / "state.json", tmp_path / "calls.log"
        self.log_path.write_text("")
        self.tmp = tmp_path
        self.state_path.write_text(json.dumps({"daemon": True, "local": [], "registry": [], "volumes": [],
                                                "untagged": [], "containers": {}, "health": {}, **state}))

    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}", "FAKE_DOCKER_STATE": str(self.state_path),
               "FAKE_DOCKER_LOG": str(self.log_path), "TMPDIR": str(self.tmp)}
        return subprocess.run([sys.executable, str(ROOT / "ops/cluster.py"), *args], capture_output=True, text=True,
                              env=env, timeout=60)

    @property
    def calls(self) -> list[str]:
        return self.log_path.read_text().splitlines()

    @property
    def state(self) -> dict:
        return json.loads(self.state_path.read_text())


def _changes(calls: list[str]) -> list[str]:
    return [c for c in calls if c.split()[0] in ("pull", "build", "import") or c.startswith(("image rm", "volume rm"))]


def test_dry_run_without_a_registry_plans_the_standins_and_builds_nothing(tmp_path):
    docker = FakeDocker(tmp_path)
    result = docker.run("images", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "stand-in base images: EBB_BASE_IMAGE=ebb-standin/python:3.11, ZOOKEEPER_IMAGE=ebb-standin/zookeeper:3.8" \
        in result.stdout
    assert "would build: ebb-standin/python:3.11, ebb-standin/zookeeper:3.8, ebb:latest" in result.stdout
    assert _changes(docker.calls) == []  # asked the registry (manifest inspect), pulled and built nothing


def test_dry_run_with_a_registry_plans_the_official_images(tmp_path):
    docker = FakeDocker(tmp_path, registry=OFFICIAL)
    result = docker.run("images", "--dry-run")
    assert "official base images: EBB_BASE_IMAGE=python:3.11-slim, ZOOKEEPER_IMAGE=zookeeper:3.8" in result.stdout
    assert "would build: ebb:latest" in result.stdout
    assert _changes(docker.calls) == []


def test_dry_run_reuses_standins_built_before(tmp_path):
    docker = FakeDocker(tmp_path, local=STANDINS)
    result = docker.run("images", "--dry-run")
    assert "stand-in base images" in result.stdout and "would build: ebb:latest" in result.stdout


def test_dry_run_without_a_daemon_says_so(tmp_path):
    docker = FakeDocker(tmp_path, daemon=False)
    result = docker.run("images", "--dry-run")
    assert result.returncode == 0 and "no Docker daemon answers" in result.stdout


def test_up_pulls_the_official_images_when_it_can(tmp_path):
    docker = FakeDocker(tmp_path, registry=OFFICIAL)
    result = docker.run("up")
    assert result.returncode == 0, result.stderr + result.stdout
    assert _changes(docker.calls) == [
        "pull python:3.11-slim", "pull zookeeper:3.8",
        f"build --network host --build-arg BASE_IMAGE=python:3.11-slim {LABEL} -t ebb:latest {ROOT} "
        "[DOCKER_BUILDKIT=0]"]
    assert "compose up -d --no-build [env python:3.11-slim zookeeper:3.8]" in docker.calls
    assert "compose ps -q [env python:3.11-slim zookeeper:3.8]" in docker.calls
    assert "after compose up returned: wt_broker-1_1, wt_broker-2_1, wt_broker-3_1, wt_zookeeper_1" in result.stdout
    assert "official images: python:3.11-slim, zookeeper:3.8" in result.stdout
    assert "make cluster-down" in result.stdout


def test_up_without_a_registry_uses_the_standins(tmp_path):
    docker = FakeDocker(tmp_path, local=STANDINS)  # built by an earlier run: not built again
    result = docker.run("up")
    assert result.returncode == 0, result.stderr + result.stdout
    assert _changes(docker.calls) == [
        "pull python:3.11-slim",  # tried, refused: no registry
        f"build --network host --build-arg BASE_IMAGE=ebb-standin/python:3.11 {LABEL} -t ebb:latest {ROOT} "
        "[DOCKER_BUILDKIT=0]"]
    assert "compose up -d --no-build [env ebb-standin/python:3.11 ebb-standin/zookeeper:3.8]" in docker.calls
    assert "no registry answers: local stand-ins built from Debian" in result.stdout


def test_up_waits_for_the_healthchecks_and_shows_what_fails(tmp_path):
    docker = FakeDocker(tmp_path, local=STANDINS, health={"broker-2": "unhealthy"})
    result = docker.run("up")
    assert result.returncode != 0
    assert "wt_broker-2_1: unhealthy\na broker's last words" in result.stdout
    assert "FAILED: the cluster is not healthy" in result.stderr and "make cluster-down" in result.stderr
    assert "bootstrap servers" not in result.stdout


def test_down_stops_the_cluster_and_says_what_remains(tmp_path):
    docker = FakeDocker(tmp_path, local=[*STANDINS, "ebb:latest"], volumes=["ebb_broker-1", "ebb_zookeeper-data"],
                        untagged=UNTAGGED)
    result = docker.run("down")
    assert result.returncode == 0, result.stderr
    assert "compose --profile monitoring down --remove-orphans [env - -]" in docker.calls
    assert "images left: ebb:latest (1.50 GB), ebb-standin/python:3.11 (1.50 GB), " \
           "ebb-standin/zookeeper:3.8 (1.50 GB), 2 untagged from earlier builds" in result.stdout
    # the sizes overlap (shared layers): the figure on disk is docker system df's
    assert "the daemon's images take 1.26 GB on disk in all (they share layers)" in result.stdout
    assert "docker image rm ebb:latest ebb-standin/python:3.11 ebb-standin/zookeeper:3.8 " + " ".join(UNTAGGED) \
        in result.stdout
    assert "docker volume rm ebb_broker-1 ebb_zookeeper-data" in result.stdout
    assert "make cluster-down PURGE=1" in result.stdout
    assert _changes(docker.calls) == []  # nothing removed without --purge


def test_down_purge_removes_images_untagged_ones_and_volumes(tmp_path):
    docker = FakeDocker(tmp_path, local=[*STANDINS, "ebb:latest"], volumes=["ebb_broker-1"], untagged=UNTAGGED)
    result = docker.run("down", "--purge")
    assert result.returncode == 0, result.stderr
    assert (docker.state["local"], docker.state["untagged"], docker.state["volumes"]) == ([], [], [])
    assert "removed images: ebb:latest, ebb-standin/python:3.11, ebb-standin/zookeeper:3.8 " \
           "and 2 untagged from earlier builds" in result.stdout
    assert docker.run("down").stdout.endswith("nothing left: no image, volume or daemon of the cluster\n")


def _fake_dockerd(tmp_path: Path, name: str = "dockerd") -> subprocess.Popen:
    """A process whose name is `name` (what /proc/<pid>/comm says), standing for a daemon."""
    program = tmp_path / name
    program.symlink_to(shutil.which("sleep"))
    return subprocess.Popen([str(program), "60"])


def test_down_names_and_purge_stops_a_dockerd_started_here(tmp_path):
    docker = FakeDocker(tmp_path)
    daemon = _fake_dockerd(tmp_path)
    try:
        (tmp_path / "ebb-cluster-dockerd.pid").write_text(str(daemon.pid))
        assert f"dockerd started by make cluster is running (pid {daemon.pid}); stop it: kill {daemon.pid}" \
            in docker.run("down").stdout
        assert f"stopped dockerd (pid {daemon.pid})" in docker.run("down", "--purge").stdout
        assert daemon.wait(10) == -15
        assert not (tmp_path / "ebb-cluster-dockerd.pid").exists()
    finally:
        daemon.kill()


def test_a_stale_pid_file_names_no_daemon_and_stops_nothing(tmp_path):
    docker = FakeDocker(tmp_path)
    other = _fake_dockerd(tmp_path, "not-docker")  # the pid now belongs to another program
    try:
        (tmp_path / "ebb-cluster-dockerd.pid").write_text(str(other.pid))
        result = docker.run("down", "--purge")
        assert result.returncode == 0 and "stopped dockerd" not in result.stdout
        assert other.poll() is None
    finally:
        other.kill()


def test_down_without_a_daemon(tmp_path):
    result = FakeDocker(tmp_path, daemon=False).run("down")
    assert result.returncode == 0 and "no Docker daemon answers" in result.stdout


@pytest.mark.parametrize("target, expected", [
    ("cluster", "ops/cluster.py up"),
    ("cluster-down", "ops/cluster.py down"),
    ("cluster-down PURGE=1", "ops/cluster.py down --purge"),
    ("cluster-smoke KEEP=1", "ops/cluster_smoke.py --keep"),
])
def test_the_make_targets(target, expected):
    # Run under `make test`, make's own variables would make this one a sub-make that prints
    # "Entering/Leaving directory" around the plan: start it as a top-level make.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    planned = subprocess.run(["make", "--no-print-directory", "-n", "-W", ".venv/.installed", *target.split()],
                             cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.strip().splitlines()[-1].endswith(expected)
