"""Kafka Streams exactly_once_v2 (kafka-streams 4.3.1, the word count of tests/interop/test_streams.py:
a repartition topic, a changelog, counts out) as two instances on three Ebb brokers and ZooKeeper; one
instance is killed with SIGKILL in the middle of a transaction (ebb.interop.StreamsWorker: its stream
thread stops right after the word "poison" went to the repartition topic, and the test waits until
its transaction is Ongoing at the coordinator and holds the last stable offset of a partition below
the high watermark, its records on the brokers, before the kill).

The survivor takes over the dead instance's tasks once the group drops it; the dead instance's
transaction is aborted by its coordinator at transaction.timeout.ms (10 s), which unblocks the
read_committed fetches of the repartition topic and the committed offsets behind it. The counts a
read_committed reader sees must end exactly right, and never pass the right count on the way (a
record counted twice would show); the partitions it held are stable again, and the survivor closes
cleanly. Without the coordinator's timeout abort the counts never complete (checked by hand).

Then a broker dies instead (test_streams_rides_a_broker_killed_mid_transaction): one instance pauses the
same way inside a transaction (its records on the brokers, a partition's LSO held), a broker is killed
with SIGKILL, (a) the transaction coordinator of the instance's transactional id, (b) the leader of a
repartition partition the transaction holds (not the coordinator); the instance resumes at once. The
counts must end exact with the broker down and again after it is restarted and back in every ISR, never
passing the right count; the instance must stay RUNNING with no stream thread dying, and close cleanly.
Its producer retries its writes and its commit at the new leader or coordinator, and no task is closed.
(c) the coordinator again, the instance resuming only once the new coordinator has aborted the open
transaction at transaction.timeout.ms (bumping the epoch): its next write is refused
(INVALID_PRODUCER_EPOCH, from the leader's check with the coordinator, as Kafka 4.3.1 maps PRODUCER_FENCED
there), Streams takes its thread as fenced, closes its tasks and makes them again (the worker reports
its task-closed/created counts), still RUNNING; the counts end exact. The cluster is the module's: the
killed broker is restarted before the next test.
"""

from __future__ import annotations

import json
import queue
import signal
import threading
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from broker.txn import TRANSACTION_STATE_TOPIC
from tests.cluster.test_transactions_chaos_cluster import assert_no_failed_handlers, client_settings
from tests.cluster.test_transactions_cluster import (
    coordinator_of,
    description_at,
    lso_and_hw,
    stable,
    state_of,
    transaction_cluster,
)
from tests.cluster.three_brokers import E, in_sync, new_topic, partition_state, restore
from tests.interop.conftest import (
    java,  # noqa: F401 - the fixture that builds and runs the Java checks
)
from tests.interop.test_streams import ROUNDS, WORDS
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

POISON = "poison"  # StreamsWorker.POISON


@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory):
    with transaction_cluster(zk_server, tmp_path_factory, f"streams-failover-{uuid.uuid4().hex[:12]}") as brokers:
        yield brokers


class Worker:
    """A StreamsWorker JVM; its JSON lines collected by a thread, by step name."""

    def __init__(self, java, cluster, stderr_path, **properties: str) -> None:  # noqa: F811
        self.stderr_path = stderr_path
        bootstrap = client_settings(cluster)["bootstrap.servers"]
        with open(stderr_path, "w") as stderr:
            self.process = java.start(bootstrap, "streams_worker", stderr, properties=properties)
        self.lines: queue.Queue[dict] = queue.Queue()
        self.steps: dict[str, dict] = {}
        self.history: list[dict] = []  # every line read so far, in order (states, threads that died)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))

    def step(self, name: str, timeout_s: float = 120) -> dict:
        """The step's line, once the worker printed it (its error, if it printed one, fails the test)."""
        def printed() -> dict | None:
            while not self.lines.empty():
                found = self.lines.get()
                self.steps[found["step"]] = found
                self.history.append(found)
            return self.steps.get(name)
        found = wait_for(lambda: printed() or self.process.poll() is not None, timeout_s=timeout_s,
                         what=f"the worker's {name}")
        assert isinstance(found, dict), f"the worker exited without {name}:\n{self.stderr()}"
        assert "error" not in found and not found.get("errors"), (found, self.stderr())
        return found

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-6000:]

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self) -> dict:
        """End of standard input: the instance closes; its "worker_closed" line (checked clean)."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        closed = self.step("worker_closed", timeout_s=60)
        assert closed["closed"] is True and closed["final"] == "NOT_RUNNING", closed
        return closed

    def tasks(self) -> dict[str, float]:
        """How many tasks the instance has made and closed so far (Streams' thread metrics)."""
        self.steps.pop("worker_tasks", None)
        self.send("tasks")
        return self.step("worker_tasks", timeout_s=30)["tasks"]

    def states(self) -> list[str]:
        """The instance's states in order, and any stream thread that died, as read so far."""
        return [line["to"] if line["step"] == "worker_state" else f"thread died: {line['error']}"
                for line in self.history if line["step"] in ("worker_state", "worker_thread_died")]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)


class Counts(threading.Thread):
    """A read_committed reader of the output topic: the last and the highest count of each word."""

    def __init__(self, cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({**client_settings(cluster), "group.id": f"counts-{topic}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
        self.last: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                message = self.consumer.poll(0.2)
                if message is not None and message.error() is None:
                    word, count = message.key().decode(), int.from_bytes(message.value(), "big", signed=True)
                    self.last[word] = count
                    self.peak[word] = max(count, self.peak.get(word, 0))
        finally:
            self.consumer.close()


def open_partitions(cluster, transactional_id: str) -> list[tuple[str, int]]:
    """The partitions of the id's transaction, as its coordinator describes them."""
    found = description_at(cluster[coordinator_of(cluster, transactional_id)], transactional_id)
    return [(t.topic, p) for t in found.topics for p in t.partitions] if found.error_code == E.NONE else []


def holding(cluster, transactional_id: str) -> list[tuple[str, int, int, int]]:
    """(topic, partition, LSO, HW) of the transaction's partitions whose LSO is below the HW."""
    found = []
    for topic, index in open_partitions(cluster, transactional_id):
        offsets = lso_and_hw(cluster, topic, index)
        if offsets is not None and offsets[0] < offsets[1]:
            found.append((topic, index, *offsets))
    return found


def expected(waves: int, poisons: int = 0) -> dict[str, int]:
    found = {word: WORDS.count(word) * ROUNDS * waves for word in set(WORDS)}
    return {**found, POISON: poisons} if poisons else found


def feed(cluster, topic: str, wave: int, poison_at: int | None = None) -> None:
    """ROUNDS sentences of WORDS keyed by sentence, spread over both partitions; with `poison_at`, one
    "poison" on each partition after that many words (so records follow it on both)."""
    made = Producer({**client_settings(cluster), "enable.idempotence": True})
    words = [WORDS[i % len(WORDS)] for i in range(ROUNDS * len(WORDS))]
    if poison_at is not None:
        words[poison_at:poison_at] = [POISON, POISON]
    for i, word in enumerate(words):
        made.produce(topic, word.encode(), key=f"wave{wave}-sentence-{i // len(WORDS)}".encode(), partition=i % 2)
    assert made.flush(60) == 0


def counted(cluster, counts: Counts, wanted: dict[str, int], workers: dict[str, Worker], what: str) -> None:
    """Wait until the counts are `wanted`; failing, say what was read then: the words off, each worker's
    transaction at its coordinator and its log."""
    try:
        wait_for(lambda: counts.last == wanted, timeout_s=120, what=what)
    except AssertionError as exc:
        off = {word: (counts.last.get(word), n) for word, n in wanted.items() if counts.last.get(word) != n}
        seen = []
        for role, worker in workers.items():
            tid = worker.steps.get("worker_running", {}).get("transactional_id")
            found = description_at(cluster[coordinator_of(cluster, tid)], tid) if tid else None
            seen.append(f"{role} {tid}: {found}\n{worker.stderr()}")
        raise AssertionError(f"{exc}\n(read, wanted) of the words off: {off}\n" + "\n".join(seen)) from None


def stopped_mid_transaction(cluster, source: str, counts: Counts, workers: dict[str, Worker], stopping: Worker,
                            transactional_id: str, step: str) -> list[tuple[str, int, int, int]]:
    """Wave 1 fed and counted; then wave 2 with its poison: `stopping` stops its stream thread inside a
    transaction (it prints `step`). Returned once that transaction is Ongoing at its coordinator and
    holds some partitions' LSO below the HW (its records on the brokers): those partitions."""
    feed(cluster, source, 1)
    counted(cluster, counts, expected(1), workers, "wave 1 counted")
    feed(cluster, source, 2, poison_at=len(WORDS) * ROUNDS // 2)
    stopping.step(step, timeout_s=60)
    wait_for(lambda: state_of(cluster, transactional_id) == "Ongoing", timeout_s=30,
             what="the stopped instance's transaction open at its coordinator")
    return wait_for(lambda: holding(cluster, transactional_id), timeout_s=30,
                    what="the stopped instance's open transaction holding a partition's LSO")


def test_streams_instance_killed_mid_transaction(java, cluster, tmp_path):  # noqa: F811
    source = new_topic(cluster, partitions=2, prefix="failover-words")
    sink = new_topic(cluster, partitions=2, prefix="failover-counts")
    names = {"ebb.streams.input": source, "ebb.streams.output": sink,
             "ebb.streams.app": f"failover-app-{uuid.uuid4().hex[:8]}"}
    counts = Counts(cluster, sink)
    counts.start()
    victim = Worker(java, cluster, tmp_path / "victim.err", **names, **{"ebb.streams.victim": "true"})
    survivor = Worker(java, cluster, tmp_path / "survivor.err", **names)
    try:
        victim_id = victim.step("worker_running")["transactional_id"]
        survivor.step("worker_running")
        held = stopped_mid_transaction(cluster, source, counts, {"victim": victim, "survivor": survivor},
                                       victim, victim_id, "victim_blocked")
        victim.stop()  # SIGKILL, its transaction open

        counted(cluster, counts, expected(2, poisons=2), {"survivor": survivor}, "the exact counts after the kill")
        assert counts.peak == counts.last, "a count went past the right one: a record counted twice"
        wait_for(lambda: state_of(cluster, victim_id) == "CompleteAbort", timeout_s=30,
                 what="the dead instance's transaction aborted by its coordinator")
        wait_for(lambda: all(stable(cluster, topic, index) for topic, index, _, _ in held), timeout_s=30,
                 what=f"the LSO at the HW again where the dead instance's transaction held it: {held}")
        survivor.close()
    finally:
        victim.stop()
        survivor.stop()
        counts.stop.set()
        counts.join(30)
    assert_no_failed_handlers(cluster)


def repartition_topic(app: str) -> str:
    return f"{app}-by-word-repartition"  # Streams' name for the groupBy's Grouped "by-word"


def coordinator_victim(cluster, transactional_id: str, held, app: str, sink: str) -> int:
    """(a) the broker coordinating the instance's transactional id."""
    return coordinator_of(cluster, transactional_id)


def leader_victim(cluster, transactional_id: str, held, app: str, sink: str) -> int:
    """(b) the leader of a repartition partition the open transaction holds (else of any repartition
    or output partition), not the coordinator: the two cases stay apart (each topic's two partitions
    have two different leaders, so one is never the coordinator)."""
    coordinator = coordinator_of(cluster, transactional_id)
    repartition = repartition_topic(app)
    candidates = [(t, p) for t, p, _, _ in held if t == repartition]
    candidates += [(t, p) for t in (repartition, sink) for p in range(2)]
    leaders = [partition_state(cluster[1], t, p).leader_id for t, p in candidates]
    return next(leader for leader in leaders if leader != coordinator)


def state_while_moving(cluster, transactional_id: str) -> str | None:
    """state_of, None while the brokers still name the killed coordinator (its port refuses)."""
    try:
        return state_of(cluster, transactional_id)
    except OSError:
        return None


def back_in_sync(cluster, node: int, topics: dict[str, int]) -> None:
    """Broker `node` started again on its data and back in the ISR of every partition of `topics`
    (name -> partition count)."""
    cluster[node].start()
    wait_for(lambda: all(in_sync(b, t, p) for b in cluster.values() for t, n in topics.items() for p in range(n)),
             timeout_s=60, what=f"broker {node} back in every ISR")


@pytest.mark.parametrize(("choose_victim", "timed_out"), [(coordinator_victim, False), (leader_victim, False),
                                                         (coordinator_victim, True)],
                         ids=["coordinator", "leader", "coordinator-then-timeout"])
def test_streams_rides_a_broker_killed_mid_transaction(java, cluster, tmp_path, choose_victim, timed_out):  # noqa: F811
    """The module's docstring says what is checked; `choose_victim` picks the broker to kill; with
    `timed_out` the instance resumes only once the new coordinator has aborted its transaction."""
    source = new_topic(cluster, partitions=2, prefix="brokerkill-words")
    sink = new_topic(cluster, partitions=2, prefix="brokerkill-counts")
    app = f"brokerkill-app-{uuid.uuid4().hex[:8]}"
    counts = Counts(cluster, sink)
    counts.start()
    worker = Worker(java, cluster, tmp_path / "worker.err", **{"ebb.streams.input": source, "ebb.streams.output": sink,
                                                              "ebb.streams.app": app, "ebb.streams.pause": "true"})
    workers = {"worker": worker}
    try:
        transactional_id = worker.step("worker_running")["transactional_id"]
        held = stopped_mid_transaction(cluster, source, counts, workers, worker, transactional_id, "worker_paused")
        before = worker.tasks()  # the start-up's rebalances done
        victim = choose_victim(cluster, transactional_id, held, app, sink)
        cluster[victim].stop(signal.SIGKILL)
        if timed_out:
            wait_for(lambda: state_while_moving(cluster, transactional_id) == "CompleteAbort", timeout_s=60,
                     what="the paused instance's transaction aborted by the new coordinator")
        worker.send("resume")
        counted(cluster, counts, expected(2, poisons=2), workers, f"the exact counts with broker {victim} down")
        if choose_victim is coordinator_victim:
            assert coordinator_of(cluster, transactional_id) != victim

        back_in_sync(cluster, victim, {source: 2, sink: 2, repartition_topic(app): 2,
                                       f"{app}-word-counts-changelog": 2, TRANSACTION_STATE_TOPIC: 3,
                                       "__consumer_offsets": 3})
        feed(cluster, source, 3)
        counted(cluster, counts, expected(3, poisons=2), workers, f"the exact counts with broker {victim} back")
        assert counts.peak == counts.last, "a count went past the right one: a record counted twice"
        states = worker.states()
        assert states[-1] == "RUNNING", states
        closed = worker.tasks()["task-closed-total"] - before["task-closed-total"]
        print(f"broker {victim} killed; the instance's states: {states}; tasks closed since: {closed}")
        # fenced by the abort, the thread closes its tasks and makes them again; else it never has to
        assert (closed > 0) == timed_out, closed
        worker.close()
    finally:
        worker.stop()
        counts.stop.set()
        counts.join(30)
        restore(cluster)
    assert_no_failed_handlers(cluster)
