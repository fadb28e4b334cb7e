"""Compaction in a real broker process with a real client: the cleaner runs on its own (its checkpoint
file says when a round finished), a consumer reads the compacted log, keyless records are refused, and
a broker killed (SIGKILL) in the middle of a round recovers a log that reads the same as an
uninterrupted round's."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from broker.log.cleaner_manager import CLEANER_OFFSET_CHECKPOINT, STOP_AT_ENV
from tests.broker import compaction_workload as workload
from tests.broker.data_wire import WireClient, create_topic
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

OVERRIDES = {"log.cleaner.backoff.ms": "50"}


def cleaned_up_to(broker: BrokerProcess, topic: str) -> int | None:
    try:
        lines = (broker.data_dir / "logs" / CLEANER_OFFSET_CHECKPOINT).read_text().splitlines()
    except FileNotFoundError:
        return None
    return next((int(line.split()[2]) for line in lines[2:] if line.split()[:2] == [topic, "0"]), None)


def partition_files(broker: BrokerProcess, topic: str) -> list[str]:
    return sorted(os.listdir(broker.data_dir / "logs" / f"{topic}-0"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("compaction"), OVERRIDES) as process:
        yield process


def test_a_compacted_topic_keeps_the_latest_value_of_each_key(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        create_topic(client, "profiles", 1, workload.TOPIC_CONFIGS)
    workload.produce(broker.bootstrap, "profiles")
    wait_for(lambda: cleaned_up_to(broker, "profiles") == workload.ACTIVE_BASE, what="a finished cleaning round")
    expected = workload.after_cleaning(workload.ACTIVE_BASE)
    assert len(expected) < workload.RECORDS
    assert workload.consume(broker.bootstrap, "profiles") == expected
    assert not [name for name in partition_files(broker, "profiles") if name.endswith((".cleaned", ".swap"))]


def test_a_record_without_a_key_is_refused(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        create_topic(client, "keyed-only", 1, {"cleanup.policy": "compact,delete"})
    error = workload.produce_keyless(broker.bootstrap, "keyed-only")
    assert error.code() == KafkaError.INVALID_RECORD


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("point", ["cleaned", "swap"])
def test_a_kill_in_the_middle_of_a_round_loses_nothing(tmp_path: Path, monkeypatch, point: str) -> None:
    # Written with the cleaner off, so that the first round starts after a restart on the whole workload.
    with BrokerProcess(tmp_path, {**OVERRIDES, "log.cleaner.enable": "false"}) as broker:
        with WireClient(broker.port) as client:
            create_topic(client, "orders", 1, workload.TOPIC_CONFIGS)
        workload.produce(broker.bootstrap, "orders")
        written = workload.consume(broker.bootstrap, "orders")
        assert written == workload.written()
        broker.overrides["log.cleaner.enable"] = "true"
        monkeypatch.setenv(STOP_AT_ENV, point)  # the broker stops itself (SIGSTOP) there; then it is killed
        broker.restart()
        wait_for(lambda: _stopped(broker.process.pid), what=f"the cleaner stopping at {point!r}")
        left = partition_files(broker, "orders")
        assert any(name.endswith(".cleaned" if point == "cleaned" else ".swap") for name in left), left
        monkeypatch.delenv(STOP_AT_ENV)
        broker.restart(signal.SIGKILL)
        wait_for(lambda: cleaned_up_to(broker, "orders") == workload.ACTIVE_BASE, what="the round done again")
        assert workload.consume(broker.bootstrap, "orders") == workload.after_cleaning(workload.ACTIVE_BASE)
        assert not [name for name in partition_files(broker, "orders") if name.endswith((".cleaned", ".swap"))]


def test_consumer_offsets_is_compacted_and_replays_the_latest_commit(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    from protocol.records import iter_batches
    from tests.broker.data_wire import fetch

    # segment.ms=1: nearly every commit rolls a segment of __consumer_offsets
    overrides = {**OVERRIDES, "log.roll.ms": "1", "offsets.topic.num.partitions": "1"}
    with BrokerProcess(tmp_path, overrides) as broker:
        with WireClient(broker.port) as client:
            create_topic(client, "read", 1)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers",
                             "enable.auto.commit": False})
        for offset in range(1, 31):
            consumer.commit(offsets=[TopicPartition("read", 0, offset)], asynchronous=False)
        consumer.close()
        wait_for(lambda: (cleaned_up_to(broker, "__consumer_offsets") or 0) > 20, what="__consumer_offsets cleaned")
        with WireClient(broker.port) as client:
            data = bytes(fetch(client, "__consumer_offsets", 0, 0).records or b"")
        keys = [(r.offset, r.key) for b in iter_batches(data) for r in b.records()]
        cleaned = [key for offset, key in keys if offset < cleaned_up_to(broker, "__consumer_offsets")]
        assert len(cleaned) == len(set(cleaned)) and len(keys) < 30
        broker.restart(signal.SIGKILL)  # the replay reads the compacted log
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers"})
        assert consumer.committed([TopicPartition("read", 0)], timeout=30)[0].offset == 30
        consumer.close()


def _cleaner_processes(pid: int) -> list[int]:
    """The broker's children that run a cleaner (not multiprocessing's resource tracker)."""
    children = [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                for child in (task / "children").read_text().split()]
    return [child for child in children if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]


def test_a_cleaner_process_that_dies_is_replaced(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        create_topic(client, "before", 1, workload.TOPIC_CONFIGS)
        create_topic(client, "after", 1, workload.TOPIC_CONFIGS)
    workload.produce(broker.bootstrap, "before")
    wait_for(lambda: cleaned_up_to(broker, "before") == workload.ACTIVE_BASE, what="the first round")
    [cleaner] = _cleaner_processes(broker.process.pid)
    os.kill(cleaner, signal.SIGKILL)
    workload.produce(broker.bootstrap, "after")
    wait_for(lambda: cleaned_up_to(broker, "after") == workload.ACTIVE_BASE, what="a round in a new process")
    assert workload.consume(broker.bootstrap, "after") == workload.after_cleaning(workload.ACTIVE_BASE)
    assert cleaner not in _cleaner_processes(broker.process.pid)
