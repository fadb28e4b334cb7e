"""A log dir that truly fails (issue 29): a real broker process on ext4 that an error turns
read-only under its open files (tests/support/failing_disk.py). The append that hits EROFS takes the
whole dir offline as Kafka does (every partition answers KAFKA_STORAGE_ERROR, the broker keeps
answering everything else); once the disk is mounted again the broker's probe finds it healthy and
reloads the partitions with recovery, no restart, and every acknowledged record is read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from tests.broker.data_wire import WireClient, batch, create_topic, fetch, produce, values
from tests.broker.wire_client import metadata
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.failing_disk import failing_disk
from tests.support.metrics_scrape import scrape, value
from tests.support.polling import wait_for

PARTITIONS = 2
pytestmark = pytest.mark.timeout(180)


def dir_metric(metrics_port: int, logs: Path, name: str) -> float | None:
    return value(scrape(f"http://127.0.0.1:{metrics_port}/metrics"), name, log_dir=str(logs))


def produce_error(client: WireClient, partition: int, payload: bytes) -> tuple[ErrorCode, str]:
    answer = produce(client, "events", partition, batch([payload]), acks=-1)
    return ErrorCode(answer.error_code), answer.error_message or ""


def test_a_failed_dir_goes_offline_whole_and_comes_back_without_a_restart(tmp_path: Path) -> None:
    metrics_port = free_port()
    with failing_disk(tmp_path) as disk:
        logs = disk.mount_point / "logs"
        with BrokerProcess(tmp_path / "broker", {
            "ebb.metrics.listener": f"http://127.0.0.1:{metrics_port}",
            "log.dirs": str(logs),
            "log.dir.min.free.bytes": "0",
            "log.dir.failure.probe.interval.ms": "200",
        }) as broker, WireClient(broker.port) as client:
            create_topic(client, "events", PARTITIONS)
            acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
            for n in range(20):
                payload = b"before-%d" % n
                assert produce_error(client, n % PARTITIONS, payload)[0] == ErrorCode.NONE
                acked[n % PARTITIONS].append(payload)
            assert dir_metric(metrics_port, logs, "ebb_log_dir_offline") == 0

            disk.fail()
            # The append that meets the read-only disk fails; then every partition of the dir is
            # offline, also one whose files were not touched.
            assert produce_error(client, 0, b"lost")[0] == ErrorCode.KAFKA_STORAGE_ERROR
            error, message = produce_error(client, 1, b"refused")
            assert error == ErrorCode.KAFKA_STORAGE_ERROR and "failed" in message, message
            assert fetch(client, "events", 1, 0).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            found = metadata(client, ["events"]).topics[0]
            assert sorted(p.error_code for p in found.partitions) == [ErrorCode.LEADER_NOT_AVAILABLE] * PARTITIONS
            assert dir_metric(metrics_port, logs, "ebb_log_dir_offline") == 1
            assert dir_metric(metrics_port, logs, "ebb_log_dir_failures_total") == 1
            # Still failing after several probes: nothing comes back on its own.
            wait_for(lambda: broker.log_text().count("log dir probe failed") >= 1, timeout_s=20,
                     what="a failed probe logged")
            assert produce_error(client, 1, b"refused")[0] == ErrorCode.KAFKA_STORAGE_ERROR

            disk.heal()
            for partition in range(PARTITIONS):
                payload = b"after-%d" % partition
                wait_for(lambda: produce_error(client, partition, payload)[0] == ErrorCode.NONE,  # noqa: B023
                         timeout_s=30, what=f"partition {partition} accepting produce again")
                acked[partition].append(payload)
            assert dir_metric(metrics_port, logs, "ebb_log_dir_offline") == 0
            assert dir_metric(metrics_port, logs, "ebb_log_dir_recoveries_total") == 1
            for partition in range(PARTITIONS):
                answer = fetch(client, "events", partition, 0)
                assert answer.error_code == ErrorCode.NONE
                assert values(answer) == acked[partition]
            text = broker.log_text()
            assert "log dir healthy again" in text and "Traceback" not in text
