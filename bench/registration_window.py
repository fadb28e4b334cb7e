"""When a restarted broker counts as alive: `python -m bench.registration_window [--quick] [--dir PATH]`.

ZooKeeper (Debian's package, started here) and two brokers on loopback. Broker 1 is the controller;
broker 2 alone holds a topic of many partitions (replication factor 1, 1 MiB segments), filled with
1 KiB records, and is killed with SIGKILL right after the last ones were acknowledged (never flushed:
the recovery points are old, so the restart recovers every segment written since). Then it is
started again, and, from the spawn of its process:
  - registered: `/brokers/ids/2` appears (a ZooKeeper watch);
  - logs loaded: its "loaded logs" line (the log's own timestamp);
  - elected: the controller writes broker 2 as leader of partition 0 (a ZooKeeper watch);
  - accepting: the first connection to its port that the kernel accepts (a probe every 5 ms);
  - served: the first ListOffsets broker 2 answers for partition 0 without an error (asked on that
    connection: a broker that holds connections answers it once it serves).
The window the controller counts the broker alive (and elects it) before its logs are loaded is
"logs loaded" minus "registered"; the one it is registered but refuses connections, "accepting" minus
"registered"; each when positive. Medians over the restarts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from bench.produce import KiB, produce_load
from protocol.messages import CreateTopicsRequest
from tests.broker.data_wire import WireClient, list_offsets
from tests.support.broker_process import BrokerProcess
from tests.support.zookeeper import ZooKeeperServer

TOPIC = "bench-registration"
SETTINGS = {"zookeeper.session.timeout.ms": "6000", "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1", "auto.leader.rebalance.enable": "false"}


def broker(root: Path, connect: str, node_id: int) -> BrokerProcess:
    settings = {"node.id": str(node_id), "zookeeper.connect": connect, **SETTINGS}
    return BrokerProcess(root / f"broker-{node_id}", settings)


def create_on_broker_2(port: int, partitions: int) -> None:
    Topic = CreateTopicsRequest.CreatableTopic
    topic = Topic(name=TOPIC, num_partitions=-1, replication_factor=-1,
                  assignments=[Topic.CreatableReplicaAssignment(partition_index=p, broker_ids=[2])
                               for p in range(partitions)],
                  configs=[Topic.CreatableTopicConfig(name="segment.bytes", value=str(1024 * KiB))])
    with WireClient(port) as client:
        [created] = client.request(CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7).topics
    assert created.error_code == 0, created.error_message


class Moments:
    """What the ZooKeeper watches saw, in time.monotonic(), after `arm`."""

    def __init__(self, kazoo) -> None:
        self.kazoo = kazoo
        self.registered: float | None = None
        self.elected: float | None = None
        self._lock = threading.Lock()
        kazoo.ChildrenWatch("/brokers/ids", self._brokers)
        kazoo.DataWatch(f"/brokers/topics/{TOPIC}/partitions/0/state", self._state)

    def arm(self) -> None:
        with self._lock:
            self.registered = self.elected = None

    def _brokers(self, children) -> None:
        with self._lock:
            if "2" in children and self.registered is None:
                self.registered = time.monotonic()

    def _state(self, data, _stat) -> None:
        with self._lock:
            if data and json.loads(data)["leader"] == 2 and self.elected is None:
                self.elected = time.monotonic()


def served(port: int) -> bool:
    return probe(port)[1]


def probe(port: int) -> tuple[float | None, bool]:
    """When a connection was accepted (None: refused) and whether ListOffsets on it was answered well."""
    try:
        client = WireClient(port)
    except OSError:
        return None, False
    accepted = time.monotonic()
    try:
        with client:
            return accepted, list_offsets(client, TOPIC, 0, -1).error_code == 0
    except OSError:
        return accepted, False


def loaded_at(process: BrokerProcess, after_wall: float) -> float:
    """Wall-clock time of the last "loaded logs" line written after `after_wall`."""
    found = None
    for line in process.log_path.read_text(errors="replace").splitlines():
        if '"loaded logs"' in line:
            stamp = datetime.fromisoformat(json.loads(line)["timestamp"].replace("Z", "+00:00")).timestamp()
            if stamp >= after_wall:
                found = stamp
    assert found is not None, "no 'loaded logs' line after the restart"
    return found


def restart(process: BrokerProcess, moments: Moments) -> dict[str, float]:
    process.stop(signal.SIGKILL)
    moments.arm()
    wall, start = time.time(), time.monotonic()
    process.launch()
    accepting = None
    while True:
        accepted, answered = probe(process.port)
        if accepting is None and accepted is not None:
            accepting = accepted - start
        if answered:
            break
        time.sleep(0.005)
    serving = time.monotonic() - start
    assert accepting is not None
    deadline = time.monotonic() + 30
    while (moments.registered is None or moments.elected is None) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert moments.registered is not None and moments.elected is not None, "no registration or election seen"
    return {"registered": moments.registered - start, "loaded": loaded_at(process, wall) - wall,
            "elected": moments.elected - start, "accepting": accepting, "served": serving}


def main() -> None:
    from kazoo.client import KazooClient

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="less data, fewer restarts")
    parser.add_argument("--dir", help="where the data goes (default: a temporary directory)")
    args = parser.parse_args()
    partitions, per_partition, reps = (200, 100, 2) if args.quick else (1000, 100, 5)
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-registration-", dir=args.dir))
    try:
        with ZooKeeperServer(root / "zookeeper") as zk:
            connect = f"{zk.connect}/bench"
            first, second = broker(root, connect, 1), broker(root, connect, 2)
            with first, second:
                create_on_broker_2(first.port, partitions)
                kazoo = KazooClient(connect)
                kazoo.start(timeout=10)
                moments = Moments(kazoo)
                rows = []
                for _ in range(reps):
                    while not served(second.port):
                        time.sleep(0.01)
                    produce_load(second.bootstrap, TOPIC, partitions, per_partition * partitions, KiB)
                    rows.append(restart(second, moments))
                kazoo.stop()
                kazoo.close()
        mib = per_partition * partitions * KiB / 2**20
        print(f"{partitions} partitions on broker 2, {mib:.0f} MiB of 1 KiB records unflushed before each SIGKILL, "
              f"1 MiB segments; medians of {reps} restarts, seconds from the process spawn:")
        for key in ("registered", "loaded", "elected", "accepting", "served"):
            print(f"  {key:<11} {statistics.median(r[key] for r in rows):6.2f}   "
                  + " ".join(f"{r[key]:.2f}" for r in rows))
        window = [max(0.0, r["loaded"] - r["registered"]) for r in rows]
        print(f"  alive before its logs were loaded: {statistics.median(window):.2f} s (median)")
        refusing = [max(0.0, r["accepting"] - r["registered"]) for r in rows]
        print(f"  registered but refusing connections: {statistics.median(refusing):.2f} s (median)   "
              + " ".join(f"{r:.2f}" for r in refusing))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
