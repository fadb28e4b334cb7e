"""Three broker processes on one ZooKeeper, and what the cluster tests ask of them over the wire."""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.messages import CreateTopicsRequest
from protocol.records import iter_batches
from tests.broker.data_wire import WireClient, delete_records
from tests.broker.wire_client import metadata
from tests.support.broker_process import BrokerProcess
from tests.support.metrics_scrape import Samples, scrape, value
from tests.support.polling import wait_for

E = ErrorCode
NODES = (1, 2, 3)
_topics = itertools.count()


@contextlib.contextmanager
def three_brokers(zk_connect: str, root: Path, extra: dict[str, str] | None = None,
                  per_node: dict[int, dict[str, str]] | None = None) -> Iterator[dict[int, BrokerProcess]]:
    """`extra`: settings for every broker; `per_node`: settings for one (node id -> settings), where
    "{port}" stands for the broker's own client port (e.g. in `listeners`)."""
    brokers = {n: BrokerProcess(root / f"broker-{n}", {**overrides(zk_connect, n), **(extra or {})}) for n in NODES}
    for n, process in brokers.items():
        process.overrides.update({k: v.format(port=process.port) for k, v in (per_node or {}).get(n, {}).items()})
    with contextlib.ExitStack() as stack:
        # Broker 1 first, so that it is the controller as every test here expects (a cluster whose
        # controller was another broker made the log dir failure test meet a case it does not set up);
        # then the other two side by side (each start is mostly the interpreter's imports).
        first, *others = brokers.values()
        stack.callback(first.stop)
        first.start()
        for process in others:
            stack.callback(process.stop)
            process.launch()
        for process in others:
            process.wait_started()
        wait_for(lambda: settled(brokers), what="every broker seeing the three and one controller")
        yield brokers


def settled(brokers: dict[int, BrokerProcess]) -> bool:
    """Every broker lists the three and names the same live controller: how a test finds the cluster."""
    views = [metadata_of(b) for b in brokers.values()]
    controllers = {v.controller_id for v in views}
    return all(len(v.brokers) == 3 for v in views) and len(controllers) == 1 and controllers <= set(NODES)


def restore(brokers: dict[int, BrokerProcess]) -> None:
    """After a test on a cluster its module shares: a broker the test stopped (killed, or left stopped when it
    failed) is started again on its data, and the next test waits for the cluster `settled`, as a fresh
    one is handed out."""
    for process in brokers.values():
        if process.process is None or process.process.poll() is not None:
            process.start()
    wait_for(lambda: settled(brokers), what="every broker seeing the three and one controller")


def overrides(connect: str, node_id: int) -> dict[str, str]:
    return {
        "node.id": str(node_id),
        "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": "4000",
        "default.replication.factor": "3",
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "3",
        "share.coordinator.state.topic.replication.factor": "3",
        "share.coordinator.state.topic.num.partitions": "3",
        "replica.lag.time.max.ms": "4000",
        "replica.fetch.wait.max.ms": "200",
        "replica.fetch.backoff.ms": "200",
        "group.initial.rebalance.delay.ms": "0",
    }


def metadata_of(broker: BrokerProcess, topics: list[str] | None = None):
    with WireClient(broker.port) as client:
        return metadata(client, topics)


def broker_ids(broker: BrokerProcess) -> list[int]:
    return sorted(b.node_id for b in metadata_of(broker).brokers)


def partition_state(broker: BrokerProcess, topic: str, index: int = 0):
    [found] = metadata_of(broker, [topic]).topics
    return next(p for p in found.partitions if p.partition_index == index)


def new_topic(cluster, partitions: int = 1, prefix: str = "replicated", configs: dict[str, str] | None = None) -> str:
    name = f"{prefix}-{next(_topics)}"
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1,
                                               configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(
                                                   name=k, value=v) for k, v in (configs or {}).items()])
    with WireClient(cluster[1].port) as client:  # -1: default.replication.factor, 3 here
        [created] = client.send(CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 7).topics
    assert created.error_code == E.NONE, created.error_message
    wait_for(lambda: all(in_sync(b, name, p) for b in cluster.values() for p in range(partitions)),
             what=f"{name} known everywhere with three replicas in sync")
    return name


def create_assigned(port: int, name: str, replicas: list[int], configs: dict[str, str]) -> None:
    """One partition on `replicas` in that order (the first leads), with the topic `configs`."""
    Topic = CreateTopicsRequest.CreatableTopic
    topic = Topic(name=name, num_partitions=-1, replication_factor=-1,
                  assignments=[Topic.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)],
                  configs=[Topic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
    with WireClient(port) as client:
        [created] = client.request(CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 7).topics
    assert created.error_code == E.NONE, created.error_message


def in_sync(broker: BrokerProcess, topic: str, index: int) -> bool:
    try:
        p = partition_state(broker, topic, index)
    except (StopIteration, ValueError):
        return False
    return p.error_code == E.NONE and p.leader_id in NODES and sorted(p.isr_nodes) == list(NODES)


def leader_of(cluster, topic: str, index: int = 0, via: BrokerProcess | None = None) -> BrokerProcess:
    return cluster[partition_state(via or cluster[1], topic, index).leader_id]


def segment_batches(broker: BrokerProcess, topic: str, index: int = 0) -> list[bytes]:
    """The record batches in the broker's segment files for the partition, raw, in offset order."""
    directory = broker.data_dir / "logs" / f"{topic}-{index}"
    found = []
    for segment in sorted(Path(directory).glob("*.log")):
        data = segment.read_bytes()
        found += [bytes(b.raw()) for b in iter_batches(data, allow_partial_tail=True)]
    return found


def start_offset_checkpoint(broker: BrokerProcess, topic: str, index: int = 0) -> int | None:
    path = broker.data_dir / "logs" / "log-start-offset-checkpoint"
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        name, partition, offset = line.split()
        if (name, int(partition)) == (topic, index):
            return int(offset)
    return None


PARKED_DELETES = {"delayedOperation": "DeleteRecords"}


def scrape_while_a_delete_parks(leader: BrokerProcess, metrics_url: str, topic: str, offset: int) -> Samples:
    """With a follower stopped, an all-replica DeleteRecords to `offset` (partition 0) parks at the
    leader: the leader's metrics scraped while it waits. It must then time out."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool, WireClient(leader.port) as client:
        answer = pool.submit(delete_records, client, topic, 0, offset, timeout_ms=8000)
        wait_for(lambda: value(scrape(metrics_url), "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                               **PARKED_DELETES) == 1, what="the DeleteRecords parked, waiting for a stopped follower")
        parked = scrape(metrics_url)
        assert answer.result(timeout=60).error_code == E.REQUEST_TIMED_OUT
    return parked

