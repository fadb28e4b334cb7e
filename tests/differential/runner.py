"""The same requests to Apache Kafka and to Ebb, the answers compared field by field.

A scenario is a function of one `Peer`: it sends requests with our codec over a plain socket and
records the decoded answers it wants judged (`peer.ask(label, body, version)`); steps that only
prepare (waiting for a leader) use `peer.send`. The runner plays the scenario against both brokers,
normalises what must differ (ids, ports, hosts, throttle times, timestamps the broker assigns, the
wording of free-text error messages) and reports every other difference that the reviewed
allow-list (`ALLOWED` in the test module) does not name with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from protocol.messages import ApiMessage, ListOffsetsRequest, MetadataRequest
from tests.broker.wire_client import WireClient
from tests.support.polling import wait_for

# Field names whose values are the broker's own, never comparable.
VOLATILE = {
    "throttle_time_ms": "<throttle>",
    "topic_id": "<topic id>",
    "cluster_id": "<cluster id>",
    "node_id": "<node>",
    "leader_id": "<node>",
    "controller_id": "<node>",
    "coordinator_id": "<node>",
    "host": "<host>",
    "port": "<port>",
    "log_append_time_ms": "<append time>",
    "member_id": "<member>",  # the coordinator makes them up (client id + a random suffix)
    "leader": "<member>",
    "log_dir": "<log dir>",  # DescribeLogDirs: each broker's own directory and the volume it is on
    "total_bytes": "<volume bytes>",
    "usable_bytes": "<volume bytes>",
}
# Sets sent as arrays (the ACLs a filter matched), whose order is each authorizer's own.
UNORDERED = {"matching_acls", "acls"}
# Lists of node ids: which nodes each broker picks is its own; how many is compared.
NODE_LISTS = {"replica_nodes", "isr_nodes", "offline_replicas"}
# Where the requests chose the nodes (a placement or a reassignment target named by rank), node ids are
# compared by rank instead (`ClusterPeer.ask_by_node`): these fields hold one node, these a list whose
# order means something (preference), these a set.
NODE_FIELDS = {"node_id", "leader_id"}
ORDERED_NODES = {"replica_nodes", "replicas"}
NODE_SETS = {"isr_nodes", "offline_replicas", "adding_replicas", "removing_replicas", "eligible_leader_replicas",
             "last_known_elr"}


@dataclass
class Peer:
    name: str
    port: int
    answers: list[tuple[str, dict]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = WireClient(self.port, timeout=30)

    def send(self, body: ApiMessage, version: int) -> ApiMessage:
        return self.client.send(body, version)

    def ask(self, label: str, body: ApiMessage, version: int) -> ApiMessage:
        return self.record(label, self.send(body, version))

    def record(self, label: str, answer: ApiMessage) -> ApiMessage:
        """Keep an answer to be judged, whichever connection it came over."""
        self.answers.append((label, normalise(answer.to_dict())))
        return answer

    def wait_for_leaders(self, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
        """Kafka answers CreateTopics before its brokers serve the partitions; wait, unrecorded."""
        def led() -> bool:
            found = self.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0]
            return found.error_code == 0 and len(found.partitions) == partitions and all(
                p.leader_id >= 0 for p in found.partitions) and self._serving(topic, partitions)
        wait_for(led, timeout_s=timeout_s, interval_s=0.1, what=f"{self.name}: leaders of {topic}")

    def _serving(self, topic: str, partitions: int) -> bool:
        """Kafka's metadata can name a leader a moment before that broker serves the partition
        (NOT_LEADER_OR_FOLLOWER to a Produce in between): asked with ListOffsets, unrecorded."""
        Part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
        reply = self.send(ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=5000, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                Part(partition_index=i, timestamp=-1) for i in range(partitions)])]), 7)
        return all(p.error_code == 0 for t in reply.topics for p in t.partitions)

    def close(self) -> None:
        self.client.close()


class ClusterPeer(Peer):
    """A cluster of brokers judged as one: requests go to a chosen node (a partition's leader or one of
    its followers, found from the metadata), answers are recorded in one list."""

    def __init__(self, name: str, ports: dict[int, int]):
        super().__init__(name, ports[min(ports)])
        self.nodes = {node: WireClient(port, timeout=30) for node, port in ports.items()}

    def _serving(self, topic: str, partitions: int) -> bool:
        return True  # the leaders are on several nodes; its scenarios wait for their replicas themselves

    def replicas(self, topic: str, partition: int) -> tuple[int, list[int]]:
        """(leader, followers) of a partition, as the first node's metadata has them."""
        reply = self.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
        found = next(p for p in reply.topics[0].partitions if p.partition_index == partition)
        return found.leader_id, [n for n in found.replica_nodes if n != found.leader_id]

    def ask_at(self, node: int, label: str, body: ApiMessage, version: int) -> ApiMessage:
        return self.record(label, self.nodes[node].send(body, version))

    def node(self, rank: int) -> int:
        """The id of this cluster's `rank`-th node (by id): scenarios name nodes by rank, so that a
        placement chosen in one cluster means the same nodes in the other."""
        return sorted(self.nodes)[rank]

    def ask_by_node(self, label: str, body: ApiMessage, version: int) -> ApiMessage:
        """`ask`, with the answer's node ids compared as ranks rather than hidden (see NODE_FIELDS)."""
        answer = self.send(body, version)
        ranks = {node: rank for rank, node in enumerate(sorted(self.nodes))}
        self.answers.append((label, normalise(by_rank(answer.to_dict(), ranks))))
        return answer

    def wait_for_replicas(self, topic: str, partitions: int, replicas: int) -> None:
        """Every partition led and with its full ISR in every node's metadata, unrecorded."""
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)])

        def in_sync() -> bool:
            views = [client.send(request, 12).topics[0] for client in self.nodes.values()]
            return all(v.error_code == 0 and len(v.partitions) == partitions and all(
                p.leader_id >= 0 and len(p.isr_nodes) == replicas for p in v.partitions) for v in views)
        wait_for(in_sync, timeout_s=60, what=f"{self.name}: {topic} with {replicas} in-sync replicas")

    def close(self) -> None:
        super().close()
        for client in self.nodes.values():
            client.close()


class Rank(int):
    """A node id turned into its rank, which `normalise` leaves alone."""


def by_rank(value, ranks: dict[int, int], key: str | None = None):
    if key in NODE_FIELDS and isinstance(value, int) and value in ranks:
        return Rank(ranks[value])
    if (key in ORDERED_NODES or key in NODE_SETS) and isinstance(value, list):
        mapped = [Rank(ranks.get(n, n)) for n in value]  # an id no node has stays visible as itself
        return mapped if key in ORDERED_NODES else sorted(mapped)
    if isinstance(value, dict):
        return {k: by_rank(v, ranks, k) for k, v in value.items()}
    if isinstance(value, list):
        return [by_rank(v, ranks) for v in value]
    return value


def normalise(value, key: str | None = None):
    if isinstance(value, Rank) or (isinstance(value, list) and value and all(isinstance(v, Rank) for v in value)):
        return [int(v) for v in value] if isinstance(value, list) else int(value)

    if key in VOLATILE and value is not None:
        return VOLATILE[key]
    if key in NODE_LISTS and isinstance(value, list):
        return f"<{len(value)} nodes>"
    if key == "error_message" and value is not None:
        return "<message>"
    if key == "session_id" and isinstance(value, int) and value != 0:
        return "<session>"  # Fetch sessions: each broker draws its own ids; whether one was given counts
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        items = [normalise(v) for v in value]
        # Keyed arrays (topics, partitions, configs) are maps to clients; Kafka orders them by hash.
        if items and all(isinstance(v, dict) for v in items):
            for field_name in ("name", "topic", "partition_index", "index", "partition", "node_id"):
                if all(field_name in v for v in items):
                    return sorted(items, key=lambda v, f=field_name: (str(type(v[f])), v[f]))
            if key in UNORDERED:
                return sorted(items, key=repr)
        return items
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def differences(ours, theirs, path: str = "") -> Iterator[tuple[str, object, object]]:
    """(path, Ebb's value, Kafka's value) for every leaf that differs."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs)):
            yield from differences(ours.get(key), theirs.get(key), f"{path}.{key}" if path else key)
    elif isinstance(ours, list) and isinstance(theirs, list) and _named(ours) and _named(theirs):
        mine, kafkas = {v["name"]: v for v in ours}, {v["name"]: v for v in theirs}
        for name in sorted(set(mine) | set(kafkas)):
            yield from differences(mine.get(name), kafkas.get(name), f"{path}[{name}]")
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            yield from differences(a, b, f"{path}[{i}]")
    elif ours != theirs:
        yield path, ours, theirs


def _named(items: list) -> bool:
    return bool(items) and all(isinstance(v, dict) and isinstance(v.get("name"), str) for v in items)


@dataclass
class Tally:
    """What the judge saw over a session, printed at its end, summed over the xdist workers (tests/conftest.py)."""

    scenarios: int = 0
    pairs: int = 0  # request/answer pairs compared
    equal: int = 0  # pairs with no difference at all
    allowed: int = 0  # pairs whose only differences are allow-listed
    differing: int = 0  # pairs with a difference nobody allowed


TALLY = Tally()


def compare(scenario: Callable[[Peer], None], ebb: Peer, kafka: Peer,
            allowed: dict[tuple[str, str], str], ignore: Callable[[str], bool] = lambda path: False) -> list[str]:
    """Run `scenario` on both; the differences neither allowed nor ignored, as readable lines."""
    for peer in (kafka, ebb):
        peer.answers.clear()
        scenario(peer)
    assert [label for label, _ in ebb.answers] == [label for label, _ in kafka.answers]
    TALLY.scenarios += 1
    found = []
    for (label, ours), (_, theirs) in zip(ebb.answers, kafka.answers, strict=True):
        TALLY.pairs += 1
        differing = [(path, a, b) for path, a, b in differences(ours, theirs)]
        unexplained = [f"{label}: {path}: Ebb {a!r}, Kafka {b!r}" for path, a, b in differing
                       if (label, path) not in allowed and ("*", path.rsplit(".", 1)[-1]) not in allowed
                       and not ignore(path)]
        TALLY.equal += not differing
        TALLY.allowed += bool(differing) and not unexplained
        TALLY.differing += bool(unexplained)
        found += unexplained
    return found
