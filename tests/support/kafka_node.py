"""Apache Kafka itself, from its jars, as the judge: one KRaft node in combined mode on loopback.

    with KafkaNode(tmp_path, classpath) as kafka:
        kafka.bootstrap          # "127.0.0.1:<port>"

    with kafka_cluster(tmp_path, classpath, 3) as nodes:   # node 1 also the controller, 2 and 3 brokers only
        ...

The jars are the ones tests/interop/java/pom.xml pins (Kafka 4.3.1 with its dependencies, fetched
by Maven). The node is formatted (`kafka.tools.StorageTool format`, what kafka-storage.sh runs)
and started (`kafka.Kafka`, what kafka-server-start.sh runs) with a small heap; it is ready when
its broker port answers ApiVersions.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from client.probe import answers
from tests.support import jvm_cds
from tests.support.broker_process import free_port

START_TIMEOUT_S = 90.0
HEAP = ["-Xmx512m", "-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]  # tests: small, quick to start
# What kafka-server-start.sh and kafka-run-class.sh give the JVM by default: for benchmarks.
SCRIPT_JVM = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
              "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]


class KafkaNode:
    def __init__(self, data_dir: Path, classpath: str, overrides: dict[str, str] | None = None, *,
                 node_id: int = 1, controller: tuple[int, int] | None = None, cluster_id: str | None = None,
                 jvm: list[str] | None = None):
        """`controller`: (node id, port) of the quorum's controller when this node is a broker only;
        without it the node is its own controller (combined mode)."""
        self.data_dir = Path(data_dir)
        self.classpath = classpath
        self.jvm = HEAP if jvm is None else jvm
        self.cluster_id = cluster_id or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.port, self.controller_port = free_port(), free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{self.port}"
        if controller is None:
            controller = (node_id, self.controller_port)
            listeners += f",CONTROLLER://127.0.0.1:{self.controller_port}"
        self.properties = {
            "process.roles": "broker,controller" if controller[0] == node_id else "broker",
            "node.id": str(node_id),
            "controller.quorum.voters": f"{controller[0]}@127.0.0.1:{controller[1]}",
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        self.process: subprocess.Popen | None = None
        self._sharing: jvm_cds.Sharing | None = None  # the running node's class archive (launch)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "kafka.log"

    def _java(self, sharing: jvm_cds.Sharing, main: str, *args: str) -> list[str]:
        return ["java", *self.jvm, *sharing.options, "-cp", self.classpath, main, *args]

    def _sharing_for(self, main: str) -> jvm_cds.Sharing:
        return jvm_cds.sharing(self.jvm, self.classpath, main)

    @property
    def config_path(self) -> Path:
        return self.data_dir / "server.properties"

    def start(self) -> KafkaNode:
        self.format()
        self.launch()
        return self.wait_ready()

    def format(self) -> None:
        """Write server.properties and format the log dir (a JVM of its own, about a second)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.config_path
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        # "--cluster-id=" keeps an id that starts with "-" (a random one does, 1 in 64) from reading as a flag
        format_args = ("format", f"--cluster-id={self.cluster_id}", "-c", str(config))
        sharing = self._sharing_for("kafka.tools.StorageTool")
        formatted = subprocess.run(self._java(sharing, "kafka.tools.StorageTool", *format_args), capture_output=True,
                                   text=True, timeout=120)
        sharing.keep(formatted.returncode)
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{formatted.stdout}\n{formatted.stderr}")

    def launch(self) -> None:
        """Start the formatted node without waiting for it (`wait_ready`)."""
        self._sharing = self._sharing_for("kafka.Kafka")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self._java(self._sharing, "kafka.Kafka", str(self.config_path)), stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def _ended(self) -> None:
        """The node's process has ended: the class archive it wrote, if any, is kept (jvm_cds)."""
        assert self.process is not None and self._sharing is not None
        self._sharing.keep(self.process.returncode)

    def wait_ready(self) -> KafkaNode:
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.process.returncode}:\n{self.log_text()}")
            if answers("127.0.0.1", self.port, timeout_s=1.0):
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"Kafka did not answer within {START_TIMEOUT_S}s:\n{self.log_text()}")

    def halt(self, sig: int = signal.SIGTERM) -> None:
        """Stop with `sig` (SIGKILL: an unclean stop) and wait for the process to end; `relaunch` starts
        it again on the same data."""
        assert self.process is not None
        os.killpg(self.process.pid, sig)
        self.process.wait(120)
        self._ended()

    def relaunch(self) -> KafkaNode:
        self.launch()
        return self.wait_ready()

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._ended()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def __enter__(self) -> KafkaNode:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def kafka_cluster(root: Path, classpath: str, size: int, overrides: dict[str, str] | None = None,
                  per_node: dict[int, dict[str, str]] | None = None) -> Iterator[list[KafkaNode]]:
    """`size` Kafka nodes of one cluster: node 1 combined (the single controller), the others brokers;
    `per_node`: settings of one node (node id -> settings) over `overrides`. They are formatted and
    started side by side (the brokers retry the controller until it listens)."""
    def settings(n: int) -> dict[str, str]:
        return {**(overrides or {}), **(per_node or {}).get(n, {})}
    first = KafkaNode(root / "kafka-1", classpath, settings(1))
    nodes = [first] + [KafkaNode(root / f"kafka-{n}", classpath, settings(n), node_id=n, cluster_id=first.cluster_id,
                                 controller=(1, first.controller_port)) for n in range(2, size + 1)]
    with contextlib.ExitStack() as stack:
        with concurrent.futures.ThreadPoolExecutor(size) as pool:
            list(pool.map(KafkaNode.format, nodes))
        for node in nodes:
            stack.callback(node.stop)
            node.launch()
        for node in nodes:
            node.wait_ready()
        yield nodes

