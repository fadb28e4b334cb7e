"""The compose cluster, built and run for real: `make cluster-smoke` (needs root or a docker group;
not part of `make test`, which must not depend on a daemon).

1. A Docker daemon: the running one, else Debian's `dockerd` (docker.io) started here.
2. Images: the official python and zookeeper images when a registry answers; otherwise local
   stand-ins built from Debian with debootstrap (ops/cluster.py).
3. The broker image (built twice: the second build after a code change shows the dependency layer
   reused), then ZooKeeper and three brokers with compose (v2 `docker compose` or v1 `docker-compose`).
4. Over the wire from the host: a topic with three replicas; produce (acks=all) and consume; a
   DeleteRecords whose start offset every broker then reports (ListOffsets with ReplicaId -2, which
   followers answer) and whose metrics show it; the leader's container stopped and leadership moved;
   started again and back in the ISR; `down` and `up` keep the data; no volume leaks.
Prints each step with its time; exits non-zero at the first failure, leaving the cluster up to look at
and saying what is left (images, volumes, a dockerd started here) and how to remove it. After a pass
it removes them all (the stand-ins too: rebuilding them takes minutes) unless --keep (`make
cluster-smoke KEEP=1`), which lists them instead. The daemon, image and stand-in steps are
ops/cluster.py's, shared with `make cluster`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ops import cluster  # noqa: E402
from protocol.errors import ErrorCode  # noqa: E402
from protocol.messages import CreateTopicsRequest  # noqa: E402
from tests.broker.data_wire import (  # noqa: E402
    WireClient,
    batch,
    delete_records,
    fetch,
    list_offsets,
    produce,
    values,
)
from tests.broker.wire_client import metadata  # noqa: E402

PORTS = {1: 9092, 2: 9093, 3: 9094}
METRICS_PORTS = {1: 9404, 2: 9405, 3: 9406}


def step(text: str) -> float:
    print(f"-- {text}", flush=True)
    return time.monotonic()


def run(*args: str, check: bool = True, quiet: bool = False, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(args, text=True, capture_output=True, env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(args)}\n{result.stdout}\n{result.stderr}")
    if not quiet and result.stdout.strip():
        print(result.stdout.strip())
    return result


def wait(check, what: str, timeout: float = 120.0, interval: float = 0.1) -> float:
    """Seconds until check() is true; exits when it never is."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if check():
                return time.monotonic() - start
        except OSError:
            pass
        time.sleep(interval)
    sys.exit(f"FAILED: {what} within {timeout:.0f} s")


# --- the images -----------------------------------------------------------------------------------

def build_broker_image(images: dict[str, str]) -> None:
    # Host networking for the build: pip reaches the package index the way this host does.
    command = cluster.broker_build_command(images)
    started = time.monotonic()
    run(*command, quiet=True, env=cluster.CLASSIC_BUILDER)
    print(f"built ebb:latest in {time.monotonic() - started:.1f} s")
    marker = ROOT / "broker" / "_smoke_build_marker.py"  # a code change, undone right after the build
    marker.write_text("# a change to the code, so that the second build shows which layers are reused\n")
    try:
        started = time.monotonic()
        output = run(*command, quiet=True, env=cluster.CLASSIC_BUILDER).stdout
    finally:
        marker.unlink()
    # The classic builder prints "Step N/M : RUN ..." and then "---> Using cache" for a reused layer.
    steps = re.split(r"\nStep \d+/\d+ : ", output)
    dependencies = next(s for s in steps if "requirements.txt" in s.split("\n", 1)[0])
    code = next(s for s in steps if s.startswith("COPY broker"))
    assert "Using cache" in dependencies and "Using cache" not in code, output
    print(f"rebuilt after a code change in {time.monotonic() - started:.1f} s: the dependency layer reused, "
          "the code layers rebuilt")
    run(*command, quiet=True, env=cluster.CLASSIC_BUILDER)  # the image without the marker


# --- the cluster over the wire -------------------------------------------------------------------

def broker_ids(port: int) -> list[int]:
    with WireClient(port, timeout=5) as client:
        return sorted(b.node_id for b in metadata(client, None).brokers)


def partition(port: int, topic: str):
    with WireClient(port, timeout=5) as client:
        [found] = metadata(client, [topic]).topics
    return found.partitions[0]


def start_offset(port: int, topic: str) -> int:
    with WireClient(port, timeout=5) as client:
        answer = list_offsets(client, topic, 0, -2, replica_id=-2)
    if answer.error_code != ErrorCode.NONE:
        raise OSError(f"ListOffsets on {port}: {ErrorCode(answer.error_code).name}")
    return answer.offset


def metric(node: int, name: str, topic: str) -> float | None:
    from tests.support.metrics_scrape import scrape, value

    return value(scrape(f"http://127.0.0.1:{METRICS_PORTS[node]}/metrics"), name, topic=topic, partition="0")


def anonymous_volumes() -> set[str]:
    """Volumes without a name (64 hex digits): what a container leaves behind for a VOLUME the compose
    file does not name. The named ones (main_zookeeper-data, ...) are meant to outlive `down`."""
    listed = run("docker", "volume", "ls", "-q", quiet=True).stdout.split()
    return {v for v in listed if re.fullmatch(r"[0-9a-f]{64}", v)}


PROMETHEUS, GRAFANA, STANDIN_PROMETHEUS = cluster.PROMETHEUS, cluster.GRAFANA, cluster.STANDIN_PROMETHEUS


def available(image: str) -> bool:
    return cluster.have_image(image) or cluster.pull(image)


def prometheus_image(images: dict[str, str]) -> str:
    """The official image, else a stand-in from Debian's prometheus package on the stand-in base."""
    if available(PROMETHEUS):
        return PROMETHEUS
    if not cluster.have_image(STANDIN_PROMETHEUS):
        context = Path(tempfile.mkdtemp(prefix="ebb-standin-prometheus-"))
        try:
            (context / "Dockerfile").write_text(
                f"FROM {images['EBB_BASE_IMAGE']}\n"
                "RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                "--no-install-recommends prometheus && rm -rf /var/lib/apt/lists/*\n"
                'ENTRYPOINT ["/usr/bin/prometheus"]\n')
            run("docker", "build", "-q", "--network", "host", "--label", cluster.LABEL, "-t", STANDIN_PROMETHEUS,
                str(context), quiet=True, env=cluster.CLASSIC_BUILDER)
        finally:
            shutil.rmtree(context, ignore_errors=True)
    return STANDIN_PROMETHEUS


def prometheus_query(expression: str) -> list:
    """Evaluate PromQL at the compose Prometheus; its error when the expression does not parse."""
    url = "http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    with urllib.request.urlopen(url, timeout=10) as answer:
        reply = json.load(answer)
    if reply["status"] != "success":
        sys.exit(f"FAILED: Prometheus refused {expression!r}: {reply}")
    return reply["data"]["result"]


def check_monitoring(compose: list[str], images: dict[str, str]) -> None:
    prometheus = prometheus_image(images)
    services = ["prometheus"] + (["grafana"] if available(GRAFANA) else [])
    env = {**images, "PROMETHEUS_IMAGE": prometheus, "GRAFANA_IMAGE": GRAFANA}
    run(*compose, "--profile", "monitoring", "up", "-d", *services, env=env, quiet=True)

    def targets_up() -> bool:
        with urllib.request.urlopen("http://127.0.0.1:9090/api/v1/targets", timeout=5) as answer:
            targets = json.load(answer)["data"]["activeTargets"]
        return len(targets) == 3 and all(t["health"] == "up" for t in targets)

    wait(targets_up, "Prometheus scraping the three brokers", interval=1)
    controllers = "sum(kafka_controller_kafkacontroller_activecontrollercount)"
    wait(lambda: [r["value"][1] for r in prometheus_query(controllers)] == ["1"], "one active controller in Prometheus",
         interval=1)
    dashboard = json.loads((ROOT / "ops/grafana/ebb.json").read_text())
    expressions = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for expression in expressions:  # Grafana's $__rate_interval is at least four scrape intervals
        prometheus_query(expression.replace("$__rate_interval", "1m"))
    lag = prometheus_query(expressions[0].replace("$__rate_interval", "1m"))
    assert any(r["metric"].get("topic") == "smoke" and r["value"][1] == "0" for r in lag), lag
    print(f"Prometheus ({prometheus}) scrapes brokers 1-3; all {len(expressions)} dashboard queries evaluate; "
          "the low watermark lag of smoke-0 is 0")
    if "grafana" in services:
        wait(lambda: urllib.request.urlopen("http://127.0.0.1:3000/api/health", timeout=2).status == 200,
             "Grafana answering", interval=1)
        request = urllib.request.Request("http://127.0.0.1:3000/api/dashboards/uid/ebb-broker",
                                         headers={"Authorization": "Basic YWRtaW46YWRtaW4="})  # admin:admin
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert json.load(answer)["dashboard"]["title"] == "Ebb"
        print("Grafana up on 127.0.0.1:3000 with the provisioned dashboard")
    else:
        print(f"SKIPPED: Grafana ({GRAFANA} is not available here: no registry, and Debian does not package it)")


def main() -> None:
    parser = argparse.ArgumentParser(description="the compose cluster, built and run for real")
    parser.add_argument("--keep", action="store_true",
                        help="leave the images and a dockerd started here (make cluster-smoke KEEP=1)")
    keep = parser.parse_args().keep
    os.chdir(ROOT)
    # Images that were here before the test are the user's: left alone by the clean-up.
    before = {image for image, _ in cluster.leftovers().images} if cluster.daemon_answers() else set()
    try:
        smoke()
    except BaseException:
        print("-- FAILED: the cluster is left up to look at; what it holds:", flush=True)
        cluster.report(cluster.leftovers())
        raise
    if keep:
        step("kept (--keep)")
        cluster.report(cluster.leftovers())
    else:
        step("cleaning up: the images built or pulled, the volumes, a dockerd started here (--keep keeps them)")
        found = cluster.leftovers()
        cluster.purge(found._replace(images=[(i, size) for i, size in found.images if i not in before]))
        kept = sorted(before & {i for i, _ in found.images})
        if kept:
            print("kept the images that were here before: " + ", ".join(kept))
    print("cluster smoke test passed")


def smoke() -> None:
    step("Docker daemon")
    cluster.ensure_daemon()
    compose = cluster.compose_command(install=True)
    print("compose: " + " ".join(compose))
    step("base images")
    images = cluster.base_images()

    def up() -> None:
        run(*compose, "up", "-d", env=images, quiet=True)

    step("broker image")
    build_broker_image(images)
    run(*compose, "down", "-v", env=images, check=False, quiet=True)  # a clean start
    leaked_before = anonymous_volumes()
    started = step("compose up: ZooKeeper and three brokers")
    up()
    cluster.wait_healthy(compose, images)
    wait(lambda: all(broker_ids(p) == [1, 2, 3] for p in PORTS.values()), "every broker seeing three")
    print(f"three brokers up in {time.monotonic() - started:.1f} s")
    listening = run("ss", "-ltnH", quiet=True).stdout.split("\n")
    zookeeper = [line.split()[3] for line in listening if line.split() and line.split()[3].endswith(":2181")]
    # Java lists an IPv4 bind as the IPv4-mapped IPv6 address: still loopback only.
    assert zookeeper in (["127.0.0.1:2181"], ["[::ffff:127.0.0.1]:2181"]), \
        f"ZooKeeper listens on {zookeeper}, not only on loopback"
    zoo_cfg = run(*compose, "exec", "-T", "zookeeper", "cat", "/conf/zoo.cfg", env=images, quiet=True).stdout
    assert "admin.enableServer=false" in zoo_cfg.split(), zoo_cfg
    print("ZooKeeper on 127.0.0.1:2181 only, its AdminServer off (admin.enableServer=false)")

    step("a topic with three replicas; produce (acks=all) and consume")
    with WireClient(PORTS[1]) as client:  # replication factor -1: the compose file's default, 3
        topic = CreateTopicsRequest.CreatableTopic(name="smoke", num_partitions=1, replication_factor=-1)
        created = client.send(CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7).topics[0]
    assert created.error_code == ErrorCode.NONE, created.error_message
    wait(lambda: len(partition(PORTS[1], "smoke").isr_nodes) == 3, "three replicas in sync")
    leader = partition(PORTS[1], "smoke").leader_id
    with WireClient(PORTS[leader]) as client:
        sent = [b"v%d" % i for i in range(10)]
        assert produce(client, "smoke", 0, batch(sent), acks=-1).error_code == ErrorCode.NONE
        assert values(fetch(client, "smoke", 0, 0)) == sent
    print(f"leader {leader}: 10 records produced and read back")

    step("DeleteRecords to offset 4; every broker reports the start")
    with WireClient(PORTS[leader]) as client:
        answer = delete_records(client, "smoke", 0, 4, timeout_ms=30_000)
    assert (answer.error_code, answer.low_watermark) == (ErrorCode.NONE, 4), answer
    wait(lambda: all(start_offset(p, "smoke") == 4 for p in PORTS.values()), "log start offset 4 everywhere")
    assert all(metric(n, "kafka_log_log_logstartoffset", "smoke") == 4 for n in PORTS)
    print("log start offset 4 on brokers 1, 2, 3 (ListOffsets and /metrics)")

    stopping = step(f"stop the leader (broker-{leader})")
    run(*compose, "stop", f"broker-{leader}", env=images, quiet=True)
    stopped = time.monotonic() - stopping
    other = next(n for n in PORTS if n != leader)
    wait(lambda: partition(PORTS[other], "smoke").leader_id not in (leader, -1), "leadership moving")
    print(f"leadership moved to broker {partition(PORTS[other], 'smoke').leader_id} "
          f"{time.monotonic() - stopping:.1f} s after the stop began ({stopped:.1f} s for the container to stop)")

    step(f"start broker-{leader} again")
    run(*compose, "start", f"broker-{leader}", env=images, quiet=True)
    rejoined = wait(lambda: len(partition(PORTS[other], "smoke").isr_nodes) == 3, "the broker back in the ISR")
    print(f"back in the ISR {rejoined:.1f} s after its start")

    step("compose down and up: the data stays")
    run(*compose, "down", env=images, quiet=True)
    up()
    wait(lambda: all(broker_ids(p) == [1, 2, 3] for p in PORTS.values()), "every broker seeing three again")
    wait(lambda: partition(PORTS[1], "smoke").leader_id in PORTS, "a leader after the restart")
    leader = partition(PORTS[1], "smoke").leader_id
    with WireClient(PORTS[leader]) as client:
        kept = wait(lambda: values(fetch(client, "smoke", 0, 4), 4) == sent[4:], "the records after the restart")
    assert start_offset(PORTS[leader], "smoke") == 4
    print(f"records 4-9 and log start offset 4 after down/up (readable {kept:.1f} s after the brokers)")
    logs = run(*compose, "logs", "--no-color", "broker-1", "broker-2", "broker-3", env=images, quiet=True).stdout
    epoch_warnings = logs.count("leader-epoch-checkpoint missing")
    assert epoch_warnings == 0, f"{epoch_warnings} leader-epoch-checkpoint warnings after a clean restart"
    print("a clean restart logs no leader-epoch-checkpoint warnings")
    leaked = anonymous_volumes() - leaked_before
    assert not leaked, f"unnamed volumes made by down/up: {leaked}"
    print("no unnamed volume made by down/up (every VOLUME is a named one)")

    step("monitoring profile: Prometheus scraping the brokers, every dashboard query evaluated")
    check_monitoring(compose, images)

    step("compose down -v")
    run(*compose, "--profile", "monitoring", "down", "-v", env=images, quiet=True)


if __name__ == "__main__":
    main()
