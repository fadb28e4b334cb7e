"""The open-file budget (broker/log/open_files.py, segment_file.OpenSegments): a broker holds more
partitions than it keeps files open for. Idle segment files beyond `ebb.log.open.segments.max` (or
beyond what `ulimit -n` leaves after its reserve) are closed and opened again when read; a limit
too low for any budget stops the broker at start-up with a message naming it; the soft limit is
raised to the hard one."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from broker.config import ConfigError, load_config
from client.probe import answers
from protocol.errors import ErrorCode
from tests.broker.data_wire import WireClient, batch, create_topic, fetch_request, produce_request, values
from tests.broker.wire_client import metadata
from tests.support.broker_process import BrokerProcess, free_port


def open_segment_files(broker: BrokerProcess) -> int:
    """How many `.log` segment files the broker has open now (its own output is broker.log)."""
    count = 0
    pid, log_dir = broker.process.pid, str(broker.data_dir / "logs")
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            count += target.startswith(log_dir) and target.endswith(".log")
        except OSError:
            continue  # closed meanwhile
    return count


def write_one_batch_each(client: WireClient, topic: str, partitions: int) -> None:
    data = {p: batch([f"{topic}-{p}".encode()]) for p in range(partitions)}
    first, *rest = data.items()
    reply = client.request(produce_request(topic, first[0], first[1], extra=rest), 9)
    errors = {p.index: p.error_code for p in reply.responses[0].partition_responses if p.error_code}
    assert not errors, errors


def read_all(client: WireClient, topic: str, partitions: int) -> dict[int, list[bytes]]:
    request = fetch_request(topic, 0, 0, partitions=[(p, 0, 4096) for p in range(partitions)])
    reply = client.request(request, 12)
    assert reply.error_code == ErrorCode.NONE
    return {p.partition_index: values(p) for p in reply.responses[0].partitions}


def check_every_partition(client: WireClient, topic: str, partitions: int) -> None:
    assert read_all(client, topic, partitions) == {p: [f"{topic}-{p}".encode()] for p in range(partitions)}


def test_idle_segment_files_beyond_the_budget_are_closed_and_reopened_when_read(tmp_path):
    budget, partitions = 100, 300
    broker = BrokerProcess(tmp_path, {"ebb.log.open.segments.max": str(budget)})
    with broker:
        with WireClient(broker.port) as client:
            create_topic(client, "many", partitions)
            write_one_batch_each(client, "many", partitions)
            check_every_partition(client, "many", partitions)
        assert open_segment_files(broker) <= budget
    # a crash leaves every segment to recover; recovery goes through the same budget
    broker.stop(signal.SIGKILL)
    broker.start()
    with WireClient(broker.port) as client:
        check_every_partition(client, "many", partitions)
        write_one_batch_each(client, "many", partitions)
        assert [len(v) for v in read_all(client, "many", partitions).values()] == [2] * partitions
    assert open_segment_files(broker) <= budget
    broker.stop()


LIMIT = 1400  # the broker keeps 1024 descriptors for itself: 376 are left for segment files


def test_a_low_ulimit_lowers_the_budget_instead_of_refusing_partitions(tmp_path):
    partitions = 600
    broker = BrokerProcess(tmp_path, open_files_limit=LIMIT)
    with broker:
        with WireClient(broker.port) as client:
            create_topic(client, "many", partitions)
            write_one_batch_each(client, "many", partitions)
            check_every_partition(client, "many", partitions)
        assert open_segment_files(broker) <= LIMIT - 1024
        assert "fewer segment files kept open than configured" in broker.log_text()
    broker.start()  # 600 segments under a limit of 1400: the old broker refused to start here
    with WireClient(broker.port) as client:
        check_every_partition(client, "many", partitions)
    broker.stop()


def _start(tmp_path, port: int, soft: int, hard: int) -> subprocess.Popen:
    args = [sys.executable, "-m", "broker", "--override", "node.id=1",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp_path / 'logs'}"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))


def wait_serving(port: int, process: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Until the broker answers: its port accepts before it serves (connections wait meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        if answers("127.0.0.1", port):
            return
        time.sleep(0.05)
    raise AssertionError(f"the broker did not answer on {port} within {timeout_s} s")


def test_start_up_refuses_a_limit_with_no_room_for_segment_files(tmp_path):
    process = _start(tmp_path, free_port(), 1050, 1050)
    try:
        _, stderr = process.communicate(timeout=60)
    finally:  # a broker that started after all must not outlive the test
        process.kill()
        process.communicate()
    assert process.returncode == 1
    assert "open-file limit is 1050" in stderr and "raise it to at least 1088" in stderr, stderr


def test_a_budget_below_the_minimum_is_a_config_error():
    with pytest.raises(ConfigError, match="ebb.log.open.segments.max: 10 is below the minimum 64"):
        load_config(None, ["ebb.log.open.segments.max=10"])


def test_the_soft_limit_is_raised_to_the_hard_limit(tmp_path):
    """What the JVM does for Kafka: a low soft limit does not hold back a broker the hard limit allows."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    port = free_port()
    process = _start(tmp_path, port, 1100, hard)
    try:
        wait_serving(port, process)
        with WireClient(port, timeout=30) as client:
            metadata(client, None)
        with open(f"/proc/{process.pid}/limits") as f:
            line = next(x for x in f if x.startswith("Max open files"))
        assert line.split()[3] == str(hard)
    finally:
        process.kill()
        process.communicate()
