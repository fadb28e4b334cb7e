"""The open-file budget (broker/log/open_files.py): partitions that would not fit under `ulimit -n`
are refused before anything is written, a log dir with more segments than the limit allows stops the
broker at start-up with a message naming the limit, and the soft limit is raised to the hard one."""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time

from protocol.errors import ErrorCode
from protocol.messages import CreatePartitionsRequest
from tests.broker.data_wire import WireClient, create_topic
from tests.broker.wire_client import create_topic as try_create_topic
from tests.broker.wire_client import metadata
from tests.support.broker_process import BrokerProcess, free_port

LIMIT = 1400  # the broker keeps 1024 descriptors for itself: about 370 segments fit


def test_partitions_beyond_the_limit_are_refused_up_front(tmp_path):
    with BrokerProcess(tmp_path, open_files_limit=LIMIT) as broker, WireClient(broker.port) as client:
        refused = try_create_topic(client, "too-many", 600)
        assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "ulimit -n" in refused.error_message and "1400" in refused.error_message
        create_topic(client, "fits", 100)
        grown = client.send(CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="fits", count=700, assignments=None)], timeout_ms=5000, validate_only=False), 3).results[0]
        assert grown.error_code == ErrorCode.KAFKA_STORAGE_ERROR and "ulimit -n" in grown.error_message
        assert "too-many" not in [t.name for t in metadata(client, None).topics]  # nothing half-made
        create_topic(client, "still-fits", 100)


def _start(tmp_path, port: int, soft: int, hard: int) -> subprocess.Popen:
    args = [sys.executable, "-m", "broker", "--override", "node.id=1",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp_path / 'logs'}"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))


def wait_listening(port: int, process: subprocess.Popen, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"the broker did not listen on {port} within {timeout_s} s")


def test_start_up_refuses_more_segments_than_the_limit(tmp_path):
    with BrokerProcess(tmp_path) as broker, WireClient(broker.port) as client:
        create_topic(client, "many", 500)
    process = _start(tmp_path, broker.port, LIMIT, LIMIT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "500 segments" in stderr and "open-file limit is 1400" in stderr, stderr


def test_the_soft_limit_is_raised_to_the_hard_limit(tmp_path):
    """What the JVM does for Kafka: a low soft limit does not hold back a broker the hard limit allows."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    port = free_port()
    process = _start(tmp_path, port, 1100, hard)
    try:
        wait_listening(port, process)
        with WireClient(port, timeout=30) as client:
            metadata(client, None)
        with open(f"/proc/{process.pid}/limits") as f:
            line = next(x for x in f if x.startswith("Max open files"))
        assert line.split()[3] == str(hard)
    finally:
        process.kill()
        process.communicate()
