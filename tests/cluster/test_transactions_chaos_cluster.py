"""A transactional consume-transform-produce loop (confluent-kafka: a read_committed consumer, a
transactional producer, the consumed offsets sent to each transaction) on three brokers and ZooKeeper,
under kill -9 of the transaction coordinator's broker and then of an output partition's leader, each
while a transaction is open (its records written, not yet committed); every few transactions the loop
also writes junk and aborts on purpose. The group's coordinator is spared (see the test).

The checks (issue #31):
- a read_committed reader running through the whole test never sees a junk record or a duplicate;
- every transaction whose commit was acknowledged is fully visible to it;
- once the faults end, no partition of the output topic nor of `__consumer_offsets` keeps its last
  stable offset below its high watermark longer than transaction.timeout.ms (plus an election and a
  cleanup round);
- the output is the input transformed, exactly once.
Every wait is on an event (progress counters, offsets), bounded.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
import traceback
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from broker.group.offsets_store import partition_for
from broker.txn import TRANSACTION_STATE_TOPIC
from protocol.enums import CoordinatorType, ElectionType
from tests.cluster.test_leader_election import elect
from tests.cluster.test_transactions_cluster import (
    PARTITIONS,
    SETTLE_S,
    TXN_TIMEOUT_MS,
    _group_elsewhere,
    alive,
    bootstrap,
    coordinator_of,
    lso_and_hw,
    read_committed,
    restart,
    spread_topic,
    stable,
    stable_everywhere,
    transaction_cluster,
)
from tests.cluster.three_brokers import E, partition_state
from tests.interop.conftest import BROKER_FAILURES
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

OFFSETS_TOPIC = "__consumer_offsets"
WAVE = 300  # input records per phase
BATCH = 20  # input records per transaction at most
ABORT_EVERY = 5  # every fifth transaction writes junk and aborts
RDKAFKA_LOG = logging.getLogger("rdkafka")


@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory):
    with transaction_cluster(zk_server, tmp_path_factory, f"txn-chaos-{uuid.uuid4().hex[:12]}") as brokers:
        yield brokers


class TransformLoop(threading.Thread):
    """Reads `source` from the group's committed offsets, writes b"out-" + value to the same partition
    of `sink` in one transaction with the offsets; on any transaction error it aborts (or, fenced or
    fatal, starts a new producer, which aborts what the old one left) and goes back to the committed
    offsets. `pause()` stops it inside a transaction."""

    def __init__(self, cluster, transactional_id: str, group: str, source: str, sink: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.transactional_id, self.group = cluster, transactional_id, group
        self.source, self.sink = source, sink
        self.committed: list[list[bytes]] = []  # each acknowledged transaction's output
        self.positions: dict[int, int] = {}  # the offsets the last acknowledged transaction committed
        self.recoveries: list[str] = []
        self.failure: BaseException | None = None
        self.stop = threading.Event()
        self._pause_wanted, self.paused, self._resume = threading.Event(), threading.Event(), threading.Event()
        self._junk = 0

    def pause(self) -> None:
        """Asks the loop to stop in its next transaction, once its records are written."""
        self._resume.clear()
        self.paused.clear()
        self._pause_wanted.set()

    def wait_paused(self) -> None:
        if not self.paused.wait(60):
            raise AssertionError(f"the loop did not pause inside a transaction: {self.failure!r}")

    def resume(self) -> None:
        self._pause_wanted.clear()
        self._resume.set()

    def done(self) -> int:
        return sum(len(values) for values in self.committed)

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test
            self.failure = exc

    def _producer(self) -> Producer:
        made = Producer({**client_settings(self.cluster), "transactional.id": self.transactional_id,
                         "transaction.timeout.ms": TXN_TIMEOUT_MS})
        _retried(made.init_transactions, 60)
        return made

    def _rewind(self, consumer: Consumer) -> None:
        """Back to the group's committed offsets (read_committed: pending transactional offsets wait)."""
        tps = [TopicPartition(self.source, p) for p in range(PARTITIONS)]
        found = _retried(consumer.committed, tps, 30)
        consumer.assign([TopicPartition(self.source, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                         for tp in found])

    def _run(self) -> None:
        consumer = Consumer({**client_settings(self.cluster), "group.id": self.group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
        producer = self._producer()
        self._rewind(consumer)
        transactions = 0
        try:
            while not self.stop.is_set():
                messages = [m for m in consumer.consume(BATCH, 0.2) if m.error() is None]
                if not messages:
                    continue
                transactions += 1
                try:
                    self._transaction(producer, consumer, messages, junk=transactions % ABORT_EVERY == 0)
                except KafkaException as exc:
                    error = exc.args[0]
                    self.recoveries.append(error.name())
                    if error.txn_requires_abort():
                        _retried(producer.abort_transaction, 60)
                    else:  # fenced or fatal: a new producer bumps the epoch and aborts what is open
                        producer = self._producer()
                    self._rewind(consumer)
        finally:
            consumer.close()

    def _transaction(self, producer: Producer, consumer: Consumer, messages, junk: bool) -> None:
        producer.begin_transaction()
        values = [b"out-" + m.value() for m in messages]
        for message, value in zip(messages, values, strict=True):
            producer.produce(self.sink, value, key=message.key(), partition=message.partition())
        if junk:
            for p in range(PARTITIONS):
                self._junk += 1
                producer.produce(self.sink, f"junk-{self._junk}".encode(), partition=p)
        if producer.flush(60):
            raise AssertionError("records still unsent after 60 s")
        if self._pause_wanted.is_set():
            self.paused.set()
            self._resume.wait(120)
        ends: dict[int, int] = {}
        for m in messages:
            ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
        producer.send_offsets_to_transaction([TopicPartition(self.source, p, o) for p, o in ends.items()],
                                             consumer.consumer_group_metadata(), 60)
        if junk:
            producer.abort_transaction(60)
            self._rewind(consumer)
            return
        _retried(producer.commit_transaction, 60)
        self.committed.append(values)
        self.positions.update(ends)


def client_settings(cluster) -> dict:
    """Every client's settings: the brokers, and librdkafka's log (refused connects to killed
    brokers) into Python's logging rather than stderr."""
    return {"bootstrap.servers": bootstrap(cluster), "logger": RDKAFKA_LOG}


def _retried(call, *args):
    """`call(*args)`, again while it fails with a retriable error (a coordinator moving, a leader elected)."""
    deadline = time.monotonic() + 90
    while True:
        try:
            return call(*args)
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise


class Reader(threading.Thread):
    """A read_committed consumer of the whole output topic, from the start to the end of the test."""

    def __init__(self, cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({**client_settings(cluster), "group.id": f"reader-{topic}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        self.topic = topic
        self.seen: list[bytes] = []
        self.stop = threading.Event()
        self.ends: dict[int, int] | None = None  # set at the end: read up to these offsets, then stop
        self.at_end = threading.Event()

    def run(self) -> None:
        tps = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
        try:
            while not self.stop.is_set():
                message = self.consumer.poll(0.2)
                if message is not None and message.error() is None:
                    self.seen.append(message.value())
                ends = self.ends
                if ends is not None and all(tp.offset >= ends[tp.partition] for tp in self.consumer.position(tps)):
                    self.at_end.set()
                    return
        finally:
            self.consumer.close()


def feed(cluster, topic: str, first: int, count: int) -> None:
    made = Producer({**client_settings(cluster), "enable.idempotence": True})
    for i in range(first, first + count):
        made.produce(topic, str(i).encode(), key=str(i).encode(), partition=i % PARTITIONS)
    assert made.flush(90) == 0


def test_consume_transform_produce_under_kill_9(cluster):
    source, sink = spread_topic(cluster), spread_topic(cluster)
    transactional_id = f"chaos-{uuid.uuid4().hex[:8]}"
    # The group's coordinator is never killed: librdkafka's send_offsets_to_transaction can hang past
    # its timeout when the group's coordinator leaves the metadata (confluentinc/librdkafka#5456,
    # #5511; seen here). So the group is one whose coordinator is not the transaction's.
    group, _ = _group_elsewhere(cluster, transactional_id)
    group_coordinator = coordinator_of(cluster, group, CoordinatorType.GROUP)
    loop = TransformLoop(cluster, transactional_id, group, source, sink)
    reader = Reader(cluster, sink)
    reader.start()
    loop.start()

    started, phases = time.monotonic(), []

    def phase(name: str) -> None:  # shown with a failure: how long each step took
        phases.append((name, round(time.monotonic() - started, 1)))
        print(phases[-1], len(loop.committed), loop.recoveries)

    def progress(count: int) -> None:
        try:
            wait_for(lambda: loop.failure is not None or loop.done() >= count, timeout_s=90,
                     what=f"{count} records through committed transactions")
        except AssertionError as exc:  # where the loop waits: a client call that ignores its timeout?
            stack = "".join(traceback.format_stack(sys._current_frames()[loop.ident]))
            raise AssertionError(f"{exc}; the loop's recoveries: {loop.recoveries}; stack:\n{stack}") from None
        assert loop.failure is None, (loop.failure, loop.recoveries)

    try:
        feed(cluster, source, 0, WAVE)
        progress(WAVE // 3)
        phase("wave 1")

        def fault(wave: int, choose_victim) -> int:
            """Wave `wave` fed, the loop paused inside a transaction, the chosen broker killed, the
            loop on without it for half a wave, the broker back in every ISR."""
            loop.pause()
            feed(cluster, source, wave * WAVE, WAVE)
            loop.wait_paused()
            victim = choose_victim()
            cluster[victim].stop(signal.SIGKILL)
            phase(f"killed {victim}")
            loop.resume()
            progress(loop.done() + WAVE // 2)
            phase("progress without it")
            restart(cluster, victim, [source, sink, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC])
            phase("restarted")
            return victim

        def output_leader() -> int:  # a leader of an output partition, neither coordinator
            spared = {coordinator_of(cluster, transactional_id), group_coordinator}
            leaders = {partition_state(cluster[1], sink, p).leader_id for p in range(PARTITIONS)}
            return min(leaders - spared)

        # 1: the coordinator's broker dies with a transaction open (records written, not committed)
        victim = fault(1, lambda: coordinator_of(cluster, transactional_id))
        assert coordinator_of(cluster, transactional_id) != victim
        for p in range(PARTITIONS):  # the output partitions' leaders back where they were
            assert elect(cluster[1], ElectionType.PREFERRED, sink, p) in (E.NONE, E.ELECTION_NOT_NEEDED)
        # 2: a leader of an output partition (not the coordinator) dies with a transaction open there
        fault(2, output_leader)
        faults_ended = time.monotonic()

        feed(cluster, source, 3 * WAVE, WAVE)
        ends = {p: lso_and_hw(cluster, source, p)[1] for p in range(PARTITIONS)}
        wait_for(lambda: loop.failure is not None or loop.positions == ends, timeout_s=90,
                 what="the loop's offsets committed at the end of the input")
        assert loop.failure is None, loop.failure
    except BaseException:
        reader.stop.set()
        raise
    finally:
        loop.stop.set()
        loop.join(120)

    # No partition's LSO stuck: the output topic and the group's offsets partition.
    offsets_partition = partition_for(group, PARTITIONS)
    wait_for(lambda: stable_everywhere(cluster, sink) and stable(cluster, OFFSETS_TOPIC, offsets_partition),
             timeout_s=max(1.0, faults_ended + SETTLE_S - time.monotonic()),
             what="the LSO at the HW on every output partition and the group's offsets partition")
    phase("stable")
    reader.ends = {p: lso_and_hw(cluster, sink, p)[1] for p in range(PARTITIONS)}
    assert reader.at_end.wait(60), "the reader did not reach the end"
    reader.join(30)
    phase("read")

    expected = sorted(b"out-" + str(i).encode() for i in range(4 * WAVE))
    junk = [v for v in reader.seen if v.startswith(b"junk-")]
    assert junk == [], f"aborted records visible to read_committed: {junk[:10]}"
    assert len(reader.seen) == len(set(reader.seen)), "a record visible twice"
    seen = set(reader.seen)
    assert all(set(values) <= seen for values in loop.committed), "an acknowledged transaction not fully visible"
    assert sorted(reader.seen) == expected
    assert read_committed(cluster, sink) == expected  # a fresh reader, after the faults
    assert len(loop.committed) >= (4 * WAVE) // BATCH and loop._junk > 0, (len(loop.committed), loop._junk)
    assert len(alive(cluster)) == 3
    assert_no_failed_handlers(cluster)


def assert_no_failed_handlers(cluster) -> None:
    """No request met a broken code path on any broker (its log, as tests/interop checks one broker's)."""
    for node, broker in cluster.items():
        failures = [line for line in broker.log_path.read_text(errors="replace").splitlines()
                    if any(mark in line for mark in BROKER_FAILURES)]
        assert not failures, (node, failures[:5])
