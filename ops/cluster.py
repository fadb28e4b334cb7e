"""The compose cluster's Docker side, for `make cluster`, `make cluster-down` and ops/cluster_smoke.py.

    python3 ops/cluster.py up              # daemon, base images, broker image, compose up -d, healthy
    python3 ops/cluster.py images --dry-run  # which images `up` would use and what it would build
    python3 ops/cluster.py down [--purge]  # compose down; what remains, and how to remove it

A Docker daemon: the running one, else Debian's `dockerd` (docker.io) started here, its pid kept in
DAEMON_PID_FILE so that `down` can say it is running and `down --purge` can stop it. Base images: the
official python and zookeeper images when they are here or can be pulled; otherwise local stand-ins
built from Debian with debootstrap (python3 + pip, and ZooKeeper from Debian's package behind
ops/standin/zookeeper-entrypoint.sh), 0.8 GB on disk, built once and reused. The broker image
`ebb:latest` is built from the chosen base with host networking (pip inside the build reaches the
package index the way this host does), and compose starts it without building again.

Only the standard library: `make cluster` runs it with the host's python3, before any virtualenv.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
OFFICIAL = {"EBB_BASE_IMAGE": "python:3.11-slim", "ZOOKEEPER_IMAGE": "zookeeper:3.8"}
STANDIN = {"EBB_BASE_IMAGE": "ebb-standin/python:3.11", "ZOOKEEPER_IMAGE": "ebb-standin/zookeeper:3.8"}
BROKER_IMAGE = "ebb:latest"
PROMETHEUS, GRAFANA = "prom/prometheus:v2.53.0", "grafana/grafana:11.1.0"
STANDIN_PROMETHEUS = "ebb-standin/prometheus:2.42"
# Every image make cluster or the smoke test may pull or build: what `down` reports and `--purge` removes.
ALL_IMAGES = (BROKER_IMAGE, *STANDIN.values(), STANDIN_PROMETHEUS, *OFFICIAL.values(), PROMETHEUS, GRAFANA)
DEBIAN_MIRROR = "http://deb.debian.org/debian"
STANDIN_PACKAGES = "python3,python3-pip,ca-certificates,openjdk-17-jre-headless,zookeeper,libslf4j-java"
DAEMON_PID_FILE = Path(tempfile.gettempdir()) / "ebb-cluster-dockerd.pid"
DAEMON_LOG = Path(tempfile.gettempdir()) / "ebb-cluster-dockerd.log"
# Every image built here carries this label: a rebuild leaves the previous image untagged, and `down
# --purge` finds those by it (`docker image rm` of the tags alone left them, 0.8 GB each, behind).
LABEL = "org.ebb.cluster=make-cluster"
HEALTH_TIMEOUT = 180.0
# The classic builder, also where Docker would use BuildKit (23+ with buildx): what ran here (Debian's
# docker.io 20.10), whose layers are images that `down --purge` removes (BuildKit keeps a build cache
# that `docker image rm` leaves) and whose "Step N/M" output the smoke test reads for layer reuse.
CLASSIC_BUILDER = {"DOCKER_BUILDKIT": "0"}


def say(text: str) -> None:
    print(f"-- {text}", flush=True)


def took(started: float) -> str:
    return f"{time.monotonic() - started:.1f} s"


def run(*args: str, check: bool = True, quiet: bool = True, env: dict | None = None,
        stdin=None) -> subprocess.CompletedProcess:
    result = subprocess.run(args, text=True, capture_output=True, env={**os.environ, **(env or {})}, stdin=stdin)
    if check and result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(args)}\n{result.stdout}\n{result.stderr}")
    if not quiet and result.stdout.strip():
        print(result.stdout.strip())
    return result


def apt_install(*packages: str) -> None:
    """Debian's packages, the package lists refreshed first when they are too old to have them."""
    command = ("apt-get", "install", "-y", "-q", "--no-install-recommends", *packages)
    if run(*command, check=False).returncode != 0:
        run("apt-get", "update", "-q")
        run(*command)


def daemon_answers() -> bool:
    return shutil.which("docker") is not None and run("docker", "info", check=False).returncode == 0


def ensure_daemon() -> None:
    """The running daemon, else Debian's dockerd started here (installed when missing)."""
    if daemon_answers():
        print("a Docker daemon is running")
        return
    if not shutil.which("dockerd"):
        say("no Docker daemon and no dockerd: installing Debian's docker.io and docker-compose")
        started = time.monotonic()
        apt_install("docker.io", "docker-compose")
        print(f"installed in {took(started)}")
    started = time.monotonic()
    with open(DAEMON_LOG, "ab") as log:
        daemon = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    DAEMON_PID_FILE.write_text(str(daemon.pid))
    deadline = time.monotonic() + 60
    while not daemon_answers():
        if daemon.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"FAILED: dockerd did not answer (its log: {DAEMON_LOG})")
        time.sleep(0.5)
    print(f"started dockerd (pid {daemon.pid}, log {DAEMON_LOG}) in {took(started)}; "
          "`make cluster-down PURGE=1` stops it")


def compose_command(install: bool = False) -> list[str]:
    """Compose v2 (`docker compose`) where it is installed, else v1 (`docker-compose`), installed from
    Debian when `install` and neither is (Debian's docker.io does not bring it)."""
    if run("docker", "compose", "version", check=False).returncode == 0:
        return ["docker", "compose"]
    if not shutil.which("docker-compose") and install and shutil.which("apt-get"):
        say("no Compose: installing Debian's docker-compose")
        apt_install("docker-compose")
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    sys.exit("FAILED: neither `docker compose` (v2) nor `docker-compose` (v1) is installed")


def have_image(name: str) -> bool:
    return run("docker", "image", "inspect", name, check=False).returncode == 0


def pull(image: str) -> bool:
    return run("docker", "pull", image, check=False).returncode == 0


def in_registry(image: str) -> bool:
    """Whether a registry has the image, asked without pulling it (for --dry-run)."""
    return run("docker", "manifest", "inspect", image, check=False).returncode == 0


def select_images(reachable: Callable[[str], bool] = pull) -> tuple[dict[str, str], list[str]]:
    """(the base images to use, the stand-ins still to build). The official images when each is here
    or `reachable` (pulled, or asked of the registry); else the stand-ins, built only when missing."""
    if all(have_image(i) or reachable(i) for i in OFFICIAL.values()):
        return OFFICIAL, []
    return STANDIN, [i for i in STANDIN.values() if not have_image(i)]


def base_images() -> dict[str, str]:
    images, missing = select_images()
    if images is OFFICIAL:
        print("official images: " + ", ".join(OFFICIAL.values()))
        return images
    print("no registry answers: local stand-ins built from Debian (" + ", ".join(STANDIN.values()) + ")")
    if missing:
        say("building the stand-ins with debootstrap (once; 5-7 minutes here, 0.8 GB)")
        started = time.monotonic()
        build_standins()
        print(f"built the stand-ins in {took(started)}")
    return images


def build_standins() -> None:
    """One debootstrap root (Debian bookworm: python3 3.11, pip, Java 17, ZooKeeper 3.8), imported as the
    python stand-in; the ZooKeeper stand-in adds the entry point. The host's CA bundle goes in so
    pip inside a build trusts what pip on this host trusts."""
    if not shutil.which("debootstrap"):
        apt_install("debootstrap")
    rootfs = Path(tempfile.mkdtemp(prefix="ebb-standin-"))
    try:
        run("debootstrap", "--variant=minbase", f"--include={STANDIN_PACKAGES}", "bookworm", str(rootfs),
            DEBIAN_MIRROR)
        for name, target in (("python", "python3"), ("pip", "pip3")):  # the names the official image has
            if not (rootfs / "usr/bin" / name).exists():
                (rootfs / "usr/bin" / name).symlink_to(target)
        for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()  # this image's Python is the application's own, as in the official image
        shutil.copy("/etc/ssl/certs/ca-certificates.crt", rootfs / "etc/ssl/certs/ca-certificates.crt")
        (rootfs / "etc/pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        run("docker", "import", "--change", 'CMD ["python3"]', "--change", f"LABEL {LABEL}", "-",
            STANDIN["EBB_BASE_IMAGE"], stdin=tar.stdout)
        tar.wait()
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    context = Path(tempfile.mkdtemp(prefix="ebb-standin-zk-"))
    try:
        shutil.copy(ROOT / "ops/standin/zookeeper-entrypoint.sh", context / "entrypoint.sh")
        (context / "Dockerfile").write_text(
            f"FROM {STANDIN['EBB_BASE_IMAGE']}\nCOPY entrypoint.sh /entrypoint.sh\n"
            "RUN chmod +x /entrypoint.sh\nVOLUME [\"/data\", \"/datalog\", \"/logs\"]\n"
            "ENTRYPOINT [\"/entrypoint.sh\"]\n")
        run("docker", "build", "-q", "--label", LABEL, "-t", STANDIN["ZOOKEEPER_IMAGE"], str(context),
            env=CLASSIC_BUILDER)
    finally:
        shutil.rmtree(context, ignore_errors=True)


def broker_build_command(images: dict[str, str]) -> list[str]:
    return ["docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={images['EBB_BASE_IMAGE']}",
            "--label", LABEL, "-t", BROKER_IMAGE, str(ROOT)]


def health(container_ids: list[str]) -> dict[str, str]:
    """Each container's name and its healthcheck's state (starting, healthy, unhealthy), or its state
    (exited, restarting, ...) when it has no healthcheck or is not running."""
    listed = run("docker", "inspect", "--format",
                 "{{.Name}} {{if and .State.Running .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}"
                 "{{end}}", *container_ids, check=False).stdout.split("\n")
    return dict(line.strip().lstrip("/").split(" ", 1) for line in listed if line.strip())


def wait_healthy(compose: list[str], env: dict[str, str]) -> None:
    """Until every container of the cluster passes its healthcheck (compose's `up -d` returns once they
    are started); the states and the last log lines of a container that does not, then exit."""
    started = time.monotonic()
    ids = run(*compose, "ps", "-q", env=env).stdout.split()
    states: dict[str, str] = {}
    while time.monotonic() - started < HEALTH_TIMEOUT:
        states = health(ids)
        if ids and len(states) == len(ids) and all(s == "healthy" for s in states.values()):
            print(f"healthy {took(started)} after compose up returned: " + ", ".join(sorted(states)))
            return
        if any(s in ("unhealthy", "exited", "dead") for s in states.values()):
            break
        time.sleep(0.5)
    for name, state in sorted(states.items()):
        print(f"{name}: {state}")
        if state != "healthy":
            logs = run("docker", "logs", "--tail", "20", name, check=False)
            print((logs.stdout + logs.stderr).strip())
    sys.exit(f"FAILED: the cluster is not healthy after {took(started)}; "
             "`make cluster-down` stops it")


def up() -> None:
    say("Docker daemon")
    ensure_daemon()
    compose = compose_command(install=True)
    say("base images")
    images = base_images()
    say(f"broker image {BROKER_IMAGE} from {images['EBB_BASE_IMAGE']}")
    started = time.monotonic()
    run(*broker_build_command(images), env=CLASSIC_BUILDER)
    print(f"built in {took(started)}")
    say("ZooKeeper and three brokers (" + " ".join(compose) + " up -d), then their healthchecks")
    started = time.monotonic()
    run(*compose, "up", "-d", "--no-build", env=images)
    print(f"started in {took(started)}")
    wait_healthy(compose, images)
    print("bootstrap servers: 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094; metrics on 127.0.0.1:9404-9406")
    print("Prometheus and Grafana too: " + " ".join(compose) + " --profile monitoring up -d")
    print("stop it: make cluster-down (keeps the data volumes and images; PURGE=1 removes them)")


def images_plan() -> None:
    """`images --dry-run`: the choice `up` would make, asking the registry without pulling."""
    if not daemon_answers():
        print("no Docker daemon answers: `make cluster` would start Debian's dockerd"
              + ("" if shutil.which("dockerd") else " (after installing docker.io)") + ", then choose the images")
        return
    images, missing = select_images(in_registry)
    kind = "official" if images is OFFICIAL else "stand-in"
    print(f"{kind} base images: " + ", ".join(f"{k}={v}" for k, v in images.items()))
    print("would build: " + ", ".join([*missing, BROKER_IMAGE]))


def project_volumes() -> list[str]:
    """The compose project's named volumes (data of ZooKeeper, the brokers, Prometheus, Grafana)."""
    listed = run("docker", "volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={ROOT.name}",
                 check=False).stdout.split()
    return sorted(listed)


def started_daemon() -> int | None:
    """The pid of a dockerd that `up` or the smoke test started and that still runs (a pid file left
    by a dockerd that is gone, its pid now another program's, names none)."""
    try:
        pid = int(DAEMON_PID_FILE.read_text())
        if Path(f"/proc/{pid}/comm").read_text().strip() != "dockerd":
            return None
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return None  # exited, not yet reaped by its parent (the smoke test, which started it)
    except (OSError, ValueError, IndexError):
        return None
    return pid


class Leftovers(NamedTuple):
    images: list[tuple[str, int]]  # present, with their sizes in bytes (shared layers counted in each)
    untagged: list[str]  # ids of images built here that a later build untagged
    volumes: list[str]  # the compose project's
    daemon: int | None  # the pid of a dockerd started here


def leftovers() -> Leftovers:
    images = []
    for image in ALL_IMAGES:
        found = run("docker", "image", "inspect", "--format", "{{.Size}}", image, check=False)
        if found.returncode == 0:
            images.append((image, int(found.stdout.strip() or 0)))
    untagged = run("docker", "image", "ls", "-q", "--no-trunc", "--filter", "dangling=true", "--filter",
                   f"label={LABEL}", check=False).stdout.split()
    return Leftovers(images, untagged, project_volumes(), started_daemon())


SIZE_UNITS = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def images_on_disk() -> float | None:
    """Bytes the daemon's images take on disk, every layer once (`docker system df`): the images
    share layers, so this is less than the sum of their sizes."""
    for line in run("docker", "system", "df", "--format", "{{.Type}}\t{{.Size}}", check=False).stdout.splitlines():
        kind, _, size = line.partition("\t")
        number = size.rstrip("kMGTB")
        if kind == "Images" and number and size[len(number):] in SIZE_UNITS:
            return float(number) * SIZE_UNITS[size[len(number):]]
    return None


def report(found: Leftovers) -> None:
    images, untagged, volumes, daemon = found
    if images or untagged:
        listed = ", ".join(f"{i} ({s / 1e9:.2f} GB)" for i, s in images)
        if untagged:
            listed += (", " if listed else "") + f"{len(untagged)} untagged from earlier builds"
        print("images left: " + listed)
        on_disk = images_on_disk()
        if on_disk is not None:
            print(f"  the daemon's images take {on_disk / 1e9:.2f} GB on disk in all (they share layers)")
        print("  remove them: docker image rm " + " ".join([*(i for i, _ in images), *untagged]))
    if volumes:
        print("data volumes left: " + ", ".join(volumes))
        print("  remove them: docker volume rm " + " ".join(volumes))
    if daemon is not None:
        print(f"dockerd started by make cluster is running (pid {daemon}); stop it: kill {daemon}")
    if images or untagged or volumes or daemon is not None:
        print("or all of it at once: make cluster-down PURGE=1")
    else:
        print("nothing left: no image, volume or daemon of the cluster")


def stop_daemon(pid: int) -> None:
    """SIGTERM, then wait for it to exit: dockerd stops its containerd and unmounts first."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while started_daemon() == pid and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        os.waitpid(pid, os.WNOHANG)  # reaped, when this process started it (the smoke test does)
    except ChildProcessError:
        pass
    if started_daemon() == pid:
        sys.exit(f"FAILED: dockerd (pid {pid}) still runs 60 s after SIGTERM (its log: {DAEMON_LOG})")
    DAEMON_PID_FILE.unlink(missing_ok=True)


def purge(found: Leftovers) -> None:
    images, untagged, volumes, daemon = found
    started = time.monotonic()
    if images or untagged:
        run("docker", "image", "rm", "-f", *(i for i, _ in images), *untagged, check=False)
        remaining = leftovers()
        stuck = [i for i, _ in remaining.images if i in dict(images)] + remaining.untagged
        if stuck:
            sys.exit("FAILED: images still here after docker image rm: " + ", ".join(stuck))
        print("removed images: " + ", ".join(i for i, _ in images)
              + (f" and {len(untagged)} untagged from earlier builds" if untagged else "") + f" in {took(started)}")
    if volumes:
        run("docker", "volume", "rm", *volumes, check=False)
        print("removed volumes: " + ", ".join(volumes))
    if daemon is not None:
        started = time.monotonic()
        stop_daemon(daemon)
        print(f"stopped dockerd (pid {daemon}) in {took(started)}")


def down(purge_all: bool) -> None:
    if not daemon_answers():
        print("no Docker daemon answers: no cluster is running, and no image or volume can be listed")
        return
    compose = compose_command()
    say("stopping the cluster (" + " ".join(compose) + " --profile monitoring down)")
    started = time.monotonic()
    run(*compose, "--profile", "monitoring", "down", "--remove-orphans", check=False, quiet=False)
    print(f"stopped in {took(started)}")
    found = leftovers()
    if purge_all:
        purge(found)
    else:
        report(found)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("up", help="start ZooKeeper and three brokers")
    plan = actions.add_parser("images", help="which images up would use")
    plan.add_argument("--dry-run", action="store_true", required=True, help="ask, build nothing")
    stop = actions.add_parser("down", help="stop the cluster, say what remains")
    stop.add_argument("--purge", action="store_true", help="also remove images, volumes and a dockerd started here")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    if args.action == "up":
        up()
    elif args.action == "images":
        images_plan()
    else:
        down(args.purge)


if __name__ == "__main__":
    main()
