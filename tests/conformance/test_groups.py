"""Consumer groups with each of the four clients, unmodified (issue 5).

For every client: two consumers in one group split a 3-partition topic; one leaves and the other
gets every partition; every record is read exactly once across the rebalances, with a synchronous
commit after each batch. The flow, in order:

    phase 0 produced -> consumer A joins alone and gets all partitions
    -> consumer B joins: the group rebalances, A and B hold disjoint partitions covering all three
    -> phase 1 produced: both read their own partitions
    -> B closes (LeaveGroup): A gets every partition, starting where B committed
    -> phase 2 produced: A reads it all
    -> each (partition, offset) was read once, by A or B; B read some; A read B's former partitions

Then the admin flows the client has: list groups, describe the group (Stable, one member), list the
group's committed offsets (the log end of every partition), and — after A leaves — delete the group.
Records are produced with our own wire client, so what is tested is each client's group protocol:

  librdkafka    FindCoordinator v2, JoinGroup v5, SyncGroup v3, Heartbeat v3, OffsetCommit v9,
                OffsetFetch v9 (groups array, require_stable), LeaveGroup v1; admin ListGroups v5,
                DescribeGroups v5 (ConsumerGroupDescribe is not advertised), DeleteGroups
  kafka-python  FindCoordinator v6, JoinGroup v7, SyncGroup v5, Heartbeat v4, OffsetCommit v8,
                OffsetFetch v8, LeaveGroup v5; admin DescribeGroups v6 with authorized operations
  aiokafka      FindCoordinator v1, JoinGroup v5, Heartbeat v1, OffsetCommit v3, OffsetFetch v3 (and
                topics=null from its admin), LeaveGroup only for a generation > 0; no DeleteGroups
  kafkajs       JoinGroup v5, SyncGroup v3, OffsetCommit v5, OffsetFetch v4, LeaveGroup v3
                (driven by js/groups.js)
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.broker.data_wire import WireClient, batch, create_topic, produce
from tests.conformance.scenario import RDKAFKA_LOG
from tests.support import polling
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 3
PER_PHASE = 5  # records per partition per phase
ALL = frozenset(range(PARTITIONS))
WAIT_S = 30.0
# Short waits so joins are quick; clients heartbeat every 300 ms.
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "100"}
JS_DIR = Path(__file__).parent / "js"


@pytest.fixture(scope="module")
def broker_overrides():
    return BROKER_OVERRIDES


# --- the shared scenario ----------------------------------------------------------------------------


@dataclass
class Run:
    bootstrap: str
    client: str
    topic: str = ""
    group: str = ""
    phases: int = 0

    def __post_init__(self):
        suffix = uuid.uuid4().hex[:8]
        self.topic = f"groups-{self.client}-{suffix}"
        self.group = f"group-{self.client}-{suffix}"
        host, port = self.bootstrap.rsplit(":", 1)
        with WireClient(int(port)) as c:
            create_topic(c, self.topic, partitions=PARTITIONS)

    def value(self, phase: int, partition: int, i: int) -> bytes:
        return f"{self.client}-{phase}-{partition}-{i}".encode()

    def produce(self) -> None:
        """One more phase: PER_PHASE records on every partition."""
        with WireClient(int(self.bootstrap.rsplit(":", 1)[1])) as c:
            for p in range(PARTITIONS):
                reply = produce(c, self.topic, p, batch([self.value(self.phases, p, i) for i in range(PER_PHASE)]))
                assert reply.error_code == 0
        self.phases += 1

    @property
    def total(self) -> int:
        return self.phases * PARTITIONS * PER_PHASE

    def expected(self) -> list[tuple[int, int, bytes]]:
        return sorted((p, phase * PER_PHASE + i, self.value(phase, p, i))
                      for phase in range(self.phases) for p in range(PARTITIONS) for i in range(PER_PHASE))

    def end_offsets(self) -> dict[int, int]:
        return {p: self.phases * PER_PHASE for p in range(PARTITIONS)}


def split(a: frozenset, b: frozenset) -> bool:
    return bool(a) and bool(b) and not a & b and a | b == ALL


def check_exactly_once(run: Run, a_seen: list, b_seen: list, b_partitions: frozenset) -> None:
    got = sorted(a_seen + b_seen)
    duplicates = sorted({r for r in got if got.count(r) > 1})
    assert not duplicates, f"read twice: {duplicates[:10]}"
    assert got == run.expected(), f"missing: {sorted(set(run.expected()) - set(got))[:10]}"
    assert b_seen, "B read nothing while it held partitions"
    taken_over = [(p, o) for p, o, _ in a_seen if p in b_partitions and o >= 2 * PER_PHASE]
    assert taken_over, "A read nothing from B's former partitions after B left"


@dataclass
class Member:
    """One consumer in a thread of its own (blocking clients): poll, record, commit, repeat."""

    name: str
    ops: object
    seen: list = field(default_factory=list)
    assigned: frozenset = frozenset()
    error: BaseException | None = None

    def __post_init__(self):
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"consumer-{self.name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            consumer = self.ops.make(self.name)
            try:
                while not self.stop.is_set():
                    records = self.ops.poll(consumer)
                    if records:
                        self.seen.extend(records)
                        self.ops.commit(consumer)
                    self.assigned = frozenset(self.ops.assignment(consumer))
            finally:
                self.ops.close(consumer)
        except BaseException as exc:  # surfaced by the waits below
            self.error = exc

    def close(self) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), f"consumer {self.name} did not close"
        if self.error is not None:
            raise self.error


def _watch(*members: Member):
    for m in members:
        if m.error is not None:
            raise m.error


def split_and_take_over(run: Run, ops) -> tuple[Member, frozenset]:
    """The group flow for a blocking client; returns A (still a member) and B's partitions."""
    run.produce()
    a = Member("a", ops)
    wait_for(lambda: _watch(a) or a.assigned == ALL, WAIT_S, what="A alone holds every partition")
    b = Member("b", ops)
    try:
        wait_for(lambda: _watch(a, b) or split(a.assigned, b.assigned), WAIT_S, what="A and B split the topic")
        run.produce()
        wait_for(lambda: _watch(a, b) or len(a.seen) + len(b.seen) >= run.total, WAIT_S, what="phases 0-1 read")
        b_partitions = b.assigned
    finally:
        b.close()  # LeaveGroup
    wait_for(lambda: _watch(a) or a.assigned == ALL, WAIT_S, what="A takes every partition back")
    run.produce()
    wait_for(lambda: _watch(a) or len(a.seen) + len(b.seen) >= run.total, WAIT_S, what="phase 2 read")
    check_exactly_once(run, a.seen, b.seen, b_partitions)
    return a, b_partitions


# --- confluent-kafka (librdkafka) ---------------------------------------------------------------------


class ConfluentOps:
    def __init__(self, run: Run):
        self.run = run

    def make(self, name):
        from confluent_kafka import Consumer

        consumer = Consumer({
            "bootstrap.servers": self.run.bootstrap, "group.id": self.run.group, "client.id": name,
            "logger": RDKAFKA_LOG, "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "heartbeat.interval.ms": 300, "session.timeout.ms": 10_000, "fetch.wait.max.ms": 100,
        })
        consumer.subscribe([self.run.topic])
        return consumer

    def poll(self, consumer):
        return [(m.partition(), m.offset(), m.value()) for m in consumer.consume(100, 0.1) if m.error() is None]

    def commit(self, consumer):
        consumer.commit(asynchronous=False)

    def assignment(self, consumer):
        return {tp.partition for tp in consumer.assignment()}

    def close(self, consumer):
        consumer.close()


def test_confluent_kafka_group(broker):
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    run = Run(broker.bootstrap, "confluent")
    a, _ = split_and_take_over(run, ConfluentOps(run))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA_LOG})
    try:
        listed = admin.list_consumer_groups(request_timeout=10).result(timeout=10)
        assert run.group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([run.group], request_timeout=10)[run.group].result(timeout=10)
        assert (described.group_id, str(described.state.name), described.partition_assignor) == (
            run.group, "STABLE", "range")
        (member,) = described.members
        assert member.client_id == "a" and member.host == "/127.0.0.1"
        assert {tp.partition for tp in member.assignment.topic_partitions} == ALL
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(run.group)],
                                                    request_timeout=10)[run.group].result(timeout=10)
        assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == run.end_offsets()
        a.close()
        admin.delete_consumer_groups([run.group], request_timeout=10)[run.group].result(timeout=10)
        listed = admin.list_consumer_groups(request_timeout=10).result(timeout=10)
        assert run.group not in {g.group_id for g in listed.valid}
    finally:
        a.stop.set()


# --- kafka-python ---------------------------------------------------------------------------------------


class KafkaPythonOps:
    def __init__(self, run: Run):
        self.run = run

    def make(self, name):
        from kafka import KafkaConsumer

        return KafkaConsumer(self.run.topic, bootstrap_servers=self.run.bootstrap, group_id=self.run.group,
                             client_id=name, enable_auto_commit=False, auto_offset_reset="earliest",
                             heartbeat_interval_ms=300, session_timeout_ms=10_000, fetch_max_wait_ms=100)

    def poll(self, consumer):
        return [(tp.partition, r.offset, r.value) for tp, rs in consumer.poll(timeout_ms=100).items() for r in rs]

    def commit(self, consumer):
        consumer.commit()

    def assignment(self, consumer):
        return {tp.partition for tp in consumer.assignment()}

    def close(self, consumer):
        consumer.close()


def test_kafka_python_group(broker):
    from kafka import KafkaAdminClient

    run = Run(broker.bootstrap, "kafka-python")
    a, _ = split_and_take_over(run, KafkaPythonOps(run))
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[run.group]["protocol_type"] == "consumer"
        described = admin.describe_groups([run.group])[run.group]  # v6, authorized operations asked for
        assert (described["error"], described["group_state"], described["protocol_data"]) == (None, "Stable", "range")
        (member,) = described["members"]
        assert (member["client_id"], member["client_host"]) == ("a", "/127.0.0.1")
        offsets = admin.list_group_offsets(run.group)[run.group]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == run.end_offsets()
        a.close()
        assert admin.delete_groups([run.group]) == {run.group: "OK"}
        assert run.group not in {g["group_id"] for g in admin.list_groups()}
    finally:
        a.stop.set()
        admin.close()


# --- aiokafka ---------------------------------------------------------------------------------------------


async def _aiokafka_group(run: Run) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.admin import AIOKafkaAdminClient

    class CommitOnRevoke(ConsumerRebalanceListener):
        """The documented pattern with manual commits: what was read is committed before a rebalance."""

        def __init__(self, consumer):
            self.consumer = consumer

        async def on_partitions_revoked(self, revoked):
            if revoked:
                await self.consumer.commit()

        async def on_partitions_assigned(self, assigned):
            pass

    state = {"a": {"seen": [], "assigned": frozenset()}, "b": {"seen": [], "assigned": frozenset()}}
    stops = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def member(name: str) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=run.bootstrap, group_id=run.group, client_id=name,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    heartbeat_interval_ms=300, session_timeout_ms=10_000, fetch_max_wait_ms=100)
        consumer.subscribe([run.topic], listener=CommitOnRevoke(consumer))
        await consumer.start()
        try:
            while not stops[name].is_set():
                records = await consumer.getmany(timeout_ms=100)
                got = [(tp.partition, r.offset, r.value) for tp, rs in records.items() for r in rs]
                if got:
                    state[name]["seen"].extend(got)
                    await consumer.commit()
                state[name]["assigned"] = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            await consumer.stop()  # LeaveGroup (aiokafka sends it for a generation > 0)

    async def until(check, what: str) -> None:
        def reached() -> bool:
            if check():
                return True
            for task in tasks.values():  # a member that failed fails the wait at once, with its error
                if task.done():
                    task.result()
            return False

        await polling.until(reached, timeout_s=WAIT_S, interval_s=0.05, what=what)

    def total() -> int:
        return len(state["a"]["seen"]) + len(state["b"]["seen"])

    run.produce()
    tasks = {"a": asyncio.create_task(member("a"))}
    try:
        await until(lambda: state["a"]["assigned"] == ALL, "A alone holds every partition")
        tasks["b"] = asyncio.create_task(member("b"))
        await until(lambda: split(state["a"]["assigned"], state["b"]["assigned"]), "A and B split the topic")
        await asyncio.to_thread(run.produce)
        await until(lambda: total() >= run.total, "phases 0-1 read")
        b_partitions = state["b"]["assigned"]
        stops["b"].set()
        await tasks.pop("b")
        await until(lambda: state["a"]["assigned"] == ALL, "A takes every partition back")
        await asyncio.to_thread(run.produce)
        await until(lambda: total() >= run.total, "phase 2 read")
        check_exactly_once(run, state["a"]["seen"], state["b"]["seen"], b_partitions)

        admin = AIOKafkaAdminClient(bootstrap_servers=run.bootstrap, request_timeout_ms=10_000)
        await admin.start()
        try:
            assert (run.group, "consumer") in await admin.list_consumer_groups()
            (response,) = await admin.describe_consumer_groups([run.group])
            (group,) = response.groups
            error_code, group_id, state_name, protocol_type, protocol, members = group[:6]
            assert (error_code, group_id, state_name, protocol_type) == (0, run.group, "Stable", "consumer")
            assert [m[1] for m in members] == ["a"]  # (member id, client id, host, metadata, assignment)
            offsets = await admin.list_consumer_group_offsets(run.group)  # OffsetFetch v3, topics=null
            assert {tp.partition: o.offset for tp, o in offsets.items()} == run.end_offsets()
        finally:
            await admin.close()
    finally:
        for stop in stops.values():
            stop.set()
        await asyncio.gather(*tasks.values(), return_exceptions=True)


def test_aiokafka_group(broker):
    asyncio.run(_aiokafka_group(Run(broker.bootstrap, "aiokafka")))


# --- kafkajs ----------------------------------------------------------------------------------------------


def test_kafkajs_group(broker):
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: `make test` needs Node.js and npm for kafkajs")
    if not (JS_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        pytest.fail("kafkajs is not installed: run `make test` (it runs `npm ci` in tests/conformance/js)")
    run = Run(broker.bootstrap, "kafkajs")
    run.produce()  # phase 0; the script produces phases 1 and 2 itself, at the right moments
    cmd = [node, str(JS_DIR / "groups.js"), broker.bootstrap, run.topic, run.group, str(PER_PHASE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=80, cwd=JS_DIR)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, f"groups.js exited {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    out = json.loads(lines[-1])
    assert out["ok"], f"kafkajs error: {out['error']}\n{proc.stderr[-4000:]}"
    result = out["result"]
    run.phases = 3

    def records(name):
        return [(p, o, v.encode()) for p, o, v in result["seen"][name]]

    assert split(frozenset(result["split"]["a"]), frozenset(result["split"]["b"]))
    assert sorted(result["takeover"]) == sorted(ALL)
    check_exactly_once(run, records("a"), records("b"), frozenset(result["split"]["b"]))
    assert {"groupId": run.group, "protocolType": "consumer"} in result["listed"]
    (described,) = result["described"]["groups"]
    assert (described["errorCode"], described["state"], described["protocolType"], described["protocol"]) == (
        0, "Stable", "consumer", "RoundRobinAssigner")
    assert [(m["clientId"], m["clientHost"]) for m in described["members"]] == [("a", "/127.0.0.1")]
    (topic,) = result["offsets"]
    assert {int(p["partition"]): int(p["offset"]) for p in topic["partitions"]} == run.end_offsets()
    assert result["deleted"] == [{"groupId": run.group, "errorCode": 0}]
    assert run.group not in {g["groupId"] for g in result["listedAfter"]}
