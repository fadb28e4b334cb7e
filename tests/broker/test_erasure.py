"""Physical erasure in a real broker process (`erasure.max.delay.ms`, docs/storage.md): after a delete
in the middle of a segment configured at 1 GiB the deleted values are in no file of the partition
directory within the bound, the rest reads back the same, DescribeErasure and the gauge say how far
the bytes are gone, `ebb delete-records --wait-erased` and `ebb offsets --erased` work, and a kill -9
in the middle of the rewrite (at either of its two steps) loses nothing."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from broker.log.common import STOP_AT_ENV
from protocol.errors import ErrorCode
from tests.broker.data_wire import WireClient, create_topic, delete_records, fetch, values
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.ebb_cli import ebb
from tests.support.erasure import GIB, describe_erasure, partition_dir, produce_values, value, values_on_disk
from tests.support.metrics_scrape import scrape
from tests.support.metrics_scrape import value as metric
from tests.support.polling import wait_for

pytestmark = [pytest.mark.timeout(180), pytest.mark.alone]
METRICS_PORT = free_port()
BOUND_MS = 2000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("erasure"),
                       {"ebb.metrics.listener": f"http://127.0.0.1:{METRICS_PORT}"}) as process:
        yield process


def read_from(client: WireClient, topic: str, offset: int) -> list[bytes]:
    return values(fetch(client, topic, 0, offset, partition_max_bytes=10 * 1024 * 1024), offset)


def test_a_delete_inside_a_1gib_segment_is_erased_within_the_bound(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        create_topic(client, "ledger", 1, {"segment.bytes": GIB, "erasure.max.delay.ms": str(BOUND_MS)})
        produce_values(client, "ledger", 500, per_batch=5)
        before = read_from(client, "ledger", 252)
        directory = partition_dir(broker.data_dir, "ledger")
        assert values_on_disk(directory, range(500)) == set(range(500))
        assert delete_records(client, "ledger", 0, 252).error_code == ErrorCode.NONE  # inside batch [250, 254]
        deleted = time.monotonic()
        wait_for(lambda: not values_on_disk(directory, range(250)), timeout_s=BOUND_MS / 1000 * 3,
                 what="the deleted values gone from every file")
        took = time.monotonic() - deleted
        assert took < BOUND_MS / 1000, f"erased after {took:.2f}s, bound {BOUND_MS} ms"
        assert values_on_disk(directory, range(250, 500)) == set(range(250, 500))  # 250, 251: their batch stays
        assert read_from(client, "ledger", 252) == before == [value(i) for i in range(252, 500)]
        broker_id, answer = describe_erasure(client, "ledger")
        assert (broker_id, answer.error_code) == (1, ErrorCode.NONE)
        assert (answer.log_start_offset, answer.erased_offset, answer.erasable_offset, answer.max_delay_ms) == \
            (252, 250, 250, BOUND_MS)
        produce_values(client, "ledger", 5, per_batch=5)  # the log goes on after the rewrite
    samples = scrape(f"http://127.0.0.1:{METRICS_PORT}/metrics")
    assert metric(samples, "ebb_partition_erasedoffset", topic="ledger", partition="0") == 250


def test_describe_erasure_answers_errors_per_partition(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        create_topic(client, "plain", 1)
        _, unknown = describe_erasure(client, "no-such-topic")
        assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        _, missing = describe_erasure(client, "plain", 7)
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        _, bad = describe_erasure(client, "bad/name")
        assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        _, off = describe_erasure(client, "plain")  # erasure off: reported, offsets still true
        assert (off.error_code, off.erased_offset, off.max_delay_ms) == (ErrorCode.NONE, 0, -1)


def test_cli_waits_for_the_erasure_and_shows_it(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        create_topic(client, "cli-erased", 1, {"segment.bytes": GIB, "erasure.max.delay.ms": "500"})
        produce_values(client, "cli-erased", 60, per_batch=3)
    done = ebb("delete-records", "--bootstrap-server", broker.bootstrap, "--topic", "cli-erased",
               "--before-offset", 30, "--wait-erased")
    assert done.returncode == 0, done.stderr
    assert "erased on every alive replica" in done.stdout and " ms after" in done.stdout
    assert not values_on_disk(partition_dir(broker.data_dir, "cli-erased"), range(30))
    shown = ebb("offsets", "--bootstrap-server", broker.bootstrap, "--topic", "cli-erased", "--erased",
                "--output", "json")
    assert shown.returncode == 0, shown.stderr
    [row] = json.loads(shown.stdout)["partitions"]
    assert row["erased"] == 30 and [(r["broker"], r["log_start_offset"], r["erased_offset"], r["error"])
                                    for r in row["replicas"]] == [(1, 30, 30, None)]
    table = ebb("offsets", "--bootstrap-server", broker.bootstrap, "--topic", "cli-erased", "--erased")
    assert "1:30/30" in table.stdout and "500" in table.stdout


def test_turning_erasure_on_erases_what_is_due_and_is_described_with_its_synonym(broker: BrokerProcess) -> None:
    from tests.broker.test_configs import SET, _alter, _configs, _incremental

    with WireClient(broker.port) as client:
        create_topic(client, "later", 1, {"segment.bytes": GIB})
        produce_values(client, "later", 40, per_batch=4)
        assert delete_records(client, "later", 0, 20).error_code == ErrorCode.NONE
        directory = partition_dir(broker.data_dir, "later")
        assert values_on_disk(directory, range(20)) == set(range(20))  # off: the bytes stay
        assert _alter(client, "later", [("erasure.max.delay.ms", "-2")]).error_code == ErrorCode.INVALID_CONFIG
        assert _incremental(client, "later", [("erasure.max.delay.ms", SET, "0")]).error_code == ErrorCode.NONE
        wait_for(lambda: not values_on_disk(directory, range(20)), what="the bytes below the start erased")
        described = _configs(client, "later", synonyms=True)["erasure.max.delay.ms"]
        assert described.value == "0"
        assert [(s.name, s.value) for s in described.synonyms] == [
            ("erasure.max.delay.ms", "0"), ("log.erasure.max.delay.ms", "-1")]


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("point", ["erasure-copied", "erasure-swap"])
def test_a_kill_in_the_middle_of_the_rewrite_loses_nothing(tmp_path: Path, monkeypatch, point: str) -> None:
    monkeypatch.setenv(STOP_AT_ENV, point)  # the broker stops itself (SIGSTOP) there; then it is killed
    with BrokerProcess(tmp_path) as broker:
        with WireClient(broker.port) as client:
            # A bound of 2 s starts the pass a second after the delete: with 0 it could reach the stop
            # point (the broker stopping itself) before the DeleteRecords answer was written.
            create_topic(client, "kept", 1, {"segment.bytes": GIB, "erasure.max.delay.ms": "2000"})
            produce_values(client, "kept", 200, per_batch=4)
            expected = read_from(client, "kept", 101)
            assert delete_records(client, "kept", 0, 101).error_code == ErrorCode.NONE
        wait_for(lambda: _stopped(broker.process.pid), what=f"the rewrite stopping at {point!r}")
        directory = partition_dir(broker.data_dir, "kept")
        suffix = ".cleaned" if point == "erasure-copied" else ".swap"
        assert any(name.endswith(suffix) for name in (p.name for p in directory.iterdir()))
        monkeypatch.delenv(STOP_AT_ENV)
        broker.restart(signal.SIGKILL)
        wait_for(lambda: not values_on_disk(directory, range(100)), what="the erasure done after the restart")
        with WireClient(broker.port) as client:
            assert read_from(client, "kept", 101) == expected
            _, answer = describe_erasure(client, "kept")
            assert (answer.log_start_offset, answer.erased_offset) == (101, 100)
        assert not [p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
