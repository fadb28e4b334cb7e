"""The `ebb` admin commands run as real processes against real broker processes.

One broker with DeleteRecords v3 (the shared `ebb_broker`) and one started with
`delete.records.v3.enable=false`, which advertises DeleteRecords v0-v2 only. The tests prepare data with
the client library, run `ebb ...` as a subprocess, and check the result through the client again.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from client import EARLIEST, Admin, Consumer, Producer
from protocol.records import NewRecord
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.ebb_cli import EBB, ebb


def table(stdout: str, columns: int) -> list[list[str]]:
    """The rows of a table (header dropped), split into `columns` cells (the last one keeps its spaces)."""
    lines = stdout.strip().splitlines()
    return [line.split(maxsplit=columns - 1) for line in lines[1:]]


def write_offsets(path: Path, entries: list[tuple[str, int, int]]) -> Path:
    path.write_text(json.dumps({"partitions": [{"topic": t, "partition": p, "offset": o} for t, p, o in entries],
                                "version": 1}))
    return path


async def filled_topic(admin: Admin, name: str, partitions: int = 1, records: int = 10, **configs) -> None:
    await admin.create_topic(name, num_partitions=partitions, configs=configs)
    async with Producer(admin.cluster, acks=-1) as producer:
        # keyed, so that compacted topics take them too
        await producer.send_batches({(name, p): [(b"k%d" % i, f"{name}-{p}-{i}".encode()) for i in range(records)]
                                     for p in range(partitions)})


async def earliest(admin: Admin, topic: str, partitions: int) -> dict[int, int]:
    found = await admin.earliest_offsets([(topic, p) for p in range(partitions)])
    return {tp.partition: offset for tp, offset in found.items()}


async def remaining(admin: Admin, topic: str, partition: int = 0) -> list[bytes]:
    consumer = Consumer(admin.cluster)
    consumer.assign({(topic, partition): EARLIEST})
    return [r.value for r in await consumer.read_to_end()]


@pytest.fixture
def bootstrap(ebb_broker) -> str:
    return ebb_broker.bootstrap


@pytest.fixture(scope="module")
def broker_without_v3(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("ebb-no-v3"), overrides={"delete.records.v3.enable": "false"}) as b:
        yield b


# -- delete-records: the JSON file form --


async def test_offset_json_file(bootstrap, tmp_path):
    async with Admin(bootstrap) as admin:
        await filled_topic(admin, "cli-json", partitions=2)
        offsets = write_offsets(tmp_path / "offsets.json", [("cli-json", 0, 3), ("cli-json", 1, -1)])
        out = ebb("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", offsets)
        assert out.returncode == 0, out.stderr
        assert out.stderr == ""
        assert out.stdout.splitlines()[0].split() == [
            "TOPIC", "PARTITION", "OFFSET", "LOW-WATERMARK", "LEADER-LOG-START-OFFSET", "ERROR"]
        assert table(out.stdout, 6) == [["cli-json", "0", "3", "3", "3", "-"],
                                        ["cli-json", "1", "-1", "10", "10", "-"]]  # -1: the high watermark
        assert await earliest(admin, "cli-json", 2) == {0: 3, 1: 10}
        assert await remaining(admin, "cli-json", 0) == [f"cli-json-0-{i}".encode() for i in range(3, 10)]

        # The same from stdin, as JSON output.
        out = ebb("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", "-", "--output", "json",
                  stdin=json.dumps({"partitions": [{"topic": "cli-json", "partition": 0, "offset": 5}]}))
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == {"partitions": [
            {"topic": "cli-json", "partition": 0, "offset": 5, "low_watermark": 5, "leader_log_start_offset": 5,
             "error": None, "error_message": None}]}
        assert await earliest(admin, "cli-json", 2) == {0: 5, 1: 10}


# -- delete-records: the flag form --


async def test_flag_form(bootstrap):
    async with Admin(bootstrap) as admin:
        await filled_topic(admin, "cli-flags", partitions=3)
        out = ebb("delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-flags", "--partition", 1,
                  "--before-offset", 4)
        assert out.returncode == 0, out.stderr
        assert table(out.stdout, 6) == [["cli-flags", "1", "4", "4", "4", "-"]]
        assert await earliest(admin, "cli-flags", 3) == {0: 0, 1: 4, 2: 0}

        out = ebb("delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-flags", "--before-offset", 6)
        assert out.returncode == 0, out.stderr
        assert [row[:4] for row in table(out.stdout, 6)] == [["cli-flags", str(p), "6", "6"] for p in range(3)]
        assert await earliest(admin, "cli-flags", 3) == {0: 6, 1: 6, 2: 6}

        out = ebb("delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-flags", "--before-offset", -1)
        assert out.returncode == 0, out.stderr
        assert await earliest(admin, "cli-flags", 3) == {0: 10, 1: 10, 2: 10}


async def test_leader_only(bootstrap, tmp_path):
    async with Admin(bootstrap) as admin:
        await filled_topic(admin, "cli-leader", partitions=2)
        offsets = write_offsets(tmp_path / "o.json", [("cli-leader", 0, 2), ("cli-leader", 1, 7)])
        out = ebb("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", offsets, "--leader-only",
                  "--timeout-ms", 5000, "--output", "json")
        assert out.returncode == 0, out.stderr
        got = {p["partition"]: (p["low_watermark"], p["leader_log_start_offset"], p["error"])
               for p in json.loads(out.stdout)["partitions"]}
        assert got == {0: (2, 2, None), 1: (7, 7, None)}
        assert await earliest(admin, "cli-leader", 2) == {0: 2, 1: 7}


async def test_any_failed_partition_exits_1(bootstrap, tmp_path):
    async with Admin(bootstrap) as admin:
        await filled_topic(admin, "cli-mixed")
        await filled_topic(admin, "cli-compacted", **{"cleanup.policy": "compact"})
        offsets = write_offsets(tmp_path / "o.json", [("cli-mixed", 0, 4), ("cli-compacted", 0, 4)])
        out = ebb("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", offsets)
        assert out.returncode == 1
        rows = {row[0]: row for row in table(out.stdout, 6)}
        assert rows["cli-mixed"][1:] == ["0", "4", "4", "4", "-"]
        assert rows["cli-compacted"][3:5] == ["-", "-"] and rows["cli-compacted"][5].startswith("POLICY_VIOLATION")
        assert "1 of 2 partition(s) failed: cli-compacted-0" in out.stderr
        assert await earliest(admin, "cli-mixed", 1) == {0: 4}
        assert await earliest(admin, "cli-compacted", 1) == {0: 0}


# -- delete-records: by timestamp --


def iso(ms: int, tz: timezone = UTC) -> str:
    return datetime.fromtimestamp(ms / 1000, tz).isoformat(timespec="milliseconds")


async def test_by_timestamp_with_out_of_order_timestamps(bootstrap):
    t0 = int(time.time() * 1000) - 3_600_000  # an hour ago: well inside the default retention
    stamps = {b"a": t0, b"b": t0 + 10, b"c": t0 + 5, b"d": t0 + 20, b"e": t0 + 15, b"f": t0 + 30}
    async with Admin(bootstrap) as admin:
        await admin.create_topic("cli-time")
        async with Producer(admin.cluster) as producer:  # offsets 0-5 in two batches
            await producer.send("cli-time", 0, [NewRecord(None, v, (), stamps[v]) for v in (b"a", b"b", b"c")])
            await producer.send("cli-time", 0, [NewRecord(None, v, (), stamps[v]) for v in (b"d", b"e", b"f")])

        def delete_before(when) -> dict:
            out = ebb("delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-time",
                      "--before-timestamp", when, "--output", "json")
            assert out.returncode == 0, out.stderr
            return json.loads(out.stdout)

        # t0+6: the first record at or after it is b (offset 1); c (t0+5) is older but comes after b: kept.
        doc = delete_before(t0 + 6)
        assert doc["before_timestamp"] == t0 + 6
        assert [(p["offset"], p["low_watermark"]) for p in doc["partitions"]] == [(1, 1)]
        assert await remaining(admin, "cli-time") == [b"b", b"c", b"d", b"e", b"f"]

        # t0+16 as ISO 8601 in another zone: the first record at or after it is d (offset 3); e (t0+15) stays.
        doc = delete_before(iso(t0 + 16, timezone(timedelta(hours=2))))
        assert doc["before_timestamp"] == t0 + 16
        assert doc["partitions"][0]["offset"] == 3
        assert await remaining(admin, "cli-time") == [b"d", b"e", b"f"]

        # A time before every record left: the first record at/after it is the log start, so nothing goes.
        doc = delete_before(iso(t0).replace("+00:00", "Z"))
        assert (doc["partitions"][0]["offset"], doc["partitions"][0]["low_watermark"]) == (3, 3)
        assert await remaining(admin, "cli-time") == [b"d", b"e", b"f"]

        # After every record: none is at or after it, so all of them are older and go (up to the HW, 6).
        doc = delete_before(t0 + 31)
        assert (doc["partitions"][0]["offset"], doc["partitions"][0]["low_watermark"]) == (6, 6)
        assert await remaining(admin, "cli-time") == []
        assert await earliest(admin, "cli-time", 1) == {0: 6}


# -- bad input: exit 2, one message, nothing deleted --


@pytest.fixture(scope="module")
def bad_topic(ebb_broker) -> str:
    async def make():
        async with Admin(ebb_broker.bootstrap) as admin:
            await filled_topic(admin, "cli-bad", partitions=2)

    asyncio.run(make())
    return "cli-bad"


def _file(text: str):
    return lambda tmp_path: ["--offset-json-file", _write(tmp_path / "offsets.json", text)]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _entries(*entries):
    return _file(json.dumps({"partitions": [{"topic": t, "partition": p, "offset": o} for t, p, o in entries],
                             "version": 1}))


def _flags(*flags):
    return lambda tmp_path: list(flags)


BAD_INPUT = {
    "malformed json": (_file('{"partitions": [{"topic": "cli-bad", '), "not valid JSON"),
    "not the kafka format": (_file('{"partitions": [{"topic": "cli-bad", "partition": 0}]}'),
                             '"offset" must be an integer'),
    "unknown topic": (_entries(("cli-bad", 0, 5), ("no-such-topic", 0, 1)), "topic 'no-such-topic' does not exist"),
    "unknown partition": (_entries(("cli-bad", 0, 5), ("cli-bad", 9, 1)), "topic 'cli-bad' has no partition 9"),
    "negative offset in the file": (_entries(("cli-bad", 0, 5), ("cli-bad", 1, -2)), "offset -2 is negative"),
    "offset above the high watermark": (_entries(("cli-bad", 0, 5), ("cli-bad", 1, 11)),
                                        "offset 11 for cli-bad-1 is above its high watermark 10"),
    "unreadable file": (lambda tmp_path: ["--offset-json-file", tmp_path / "missing.json"], "cannot read"),
    "file and flags": (lambda tmp_path: ["--offset-json-file", _write(tmp_path / "o.json", "{}"), "--topic", "cli-bad"],
                       "cannot be combined with --topic"),
    "unknown topic flag": (_flags("--topic", "no-such-topic", "--before-offset", 1), "does not exist"),
    "unknown partition flag": (_flags("--topic", "cli-bad", "--partition", 2, "--before-offset", 1),
                               "has no partition 2"),
    "negative offset flag": (_flags("--topic", "cli-bad", "--before-offset", -3), "--before-offset -3 is negative"),
    "unparseable timestamp": (_flags("--topic", "cli-bad", "--before-timestamp", "yesterday"), "not a timestamp"),
    "timestamp without zone": (_flags("--topic", "cli-bad", "--before-timestamp", "2024-05-01T12:00:00"),
                               "no time zone"),
    "negative timestamp": (_flags("--topic", "cli-bad", "--before-timestamp", "-5"), "must be >= 0"),
    "nothing to delete": (_flags("--topic", "cli-bad"), "--topic needs --before-offset"),
    "security settings": (lambda tmp_path: ["--topic", "cli-bad", "--before-offset", 1, "--command-config",
                                            _write(tmp_path / "c.properties", "sasl.mechanism=PLAIN\n")],
                          "sasl.mechanism is set but security.protocol is PLAINTEXT"),
    "bad command config value": (lambda tmp_path: ["--topic", "cli-bad", "--before-offset", 1, "--command-config",
                                                   _write(tmp_path / "c.properties", "request.timeout.ms=soon\n")],
                                 "request.timeout.ms=soon: must be an integer"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
async def test_bad_input_exits_2_before_deleting_anything(bootstrap, bad_topic, tmp_path, case):
    make_args, message = BAD_INPUT[case]
    out = ebb("delete-records", "--bootstrap-server", bootstrap, *make_args(tmp_path))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert message in out.stderr
    assert out.stderr.startswith("ebb delete-records: ") and len(out.stderr.strip().splitlines()) == 1
    assert out.stdout == ""
    async with Admin(bootstrap) as admin:
        assert await earliest(admin, bad_topic, 2) == {0: 0, 1: 0}


@pytest.mark.parametrize(("server", "message"), [
    ("127.0.0.1:{free_port}", "cannot reach the bootstrap server 127.0.0.1:"),
    ("localhost", "'localhost' is not host:port"),
])
def test_unreachable_or_malformed_bootstrap_server(server, message):
    server = server.format(free_port=free_port())  # taken here: ids the same in every xdist worker
    out = ebb("delete-records", "--bootstrap-server", server, "--topic", "cli-bad", "--before-offset", 1)
    assert out.returncode == 2
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert out.stdout == ""


# -- the unsupported-version path --


async def test_leader_only_against_a_broker_without_v3_fails_each_partition(broker_without_v3):
    bootstrap = broker_without_v3.bootstrap
    async with Admin(bootstrap) as admin:
        await filled_topic(admin, "cli-v2", partitions=2)
        out = ebb("delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-v2", "--before-offset", 3,
                  "--leader-only")
        assert out.returncode == 1
        rows = table(out.stdout, 6)
        assert [row[:5] for row in rows] == [["cli-v2", str(p), "3", "-", "-"] for p in range(2)]
        assert all(row[5].startswith("UNSUPPORTED_VERSION") and "leader-only needs v3" in row[5] for row in rows)
        assert "2 of 2 partition(s) failed" in out.stderr
        assert await earliest(admin, "cli-v2", 2) == {0: 0, 1: 0}  # never silently downgraded

        out = ebb("delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-v2", "--partition", 0,
                  "--before-offset", 3, "--leader-only", "--output", "json")
        assert out.returncode == 1
        [part] = json.loads(out.stdout)["partitions"]
        assert (part["error"], part["low_watermark"], part["leader_log_start_offset"]) == (
            "UNSUPPORTED_VERSION", -1, -1)
        assert await earliest(admin, "cli-v2", 2) == {0: 0, 1: 0}

        # Without --leader-only the same broker is asked with v2, which has no leader log start offset.
        out = ebb("delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-v2", "--before-offset", 3,
                  "--output", "json")
        assert out.returncode == 0, out.stderr
        assert [(p["low_watermark"], p["leader_log_start_offset"], p["error"])
                for p in json.loads(out.stdout)["partitions"]] == [(3, -1, None), (3, -1, None)]
        assert await earliest(admin, "cli-v2", 2) == {0: 3, 1: 3}


# -- command config and progress --


async def test_command_config(bootstrap, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("# client settings\n"
                      f"bootstrap.servers = {bootstrap}\n"
                      "client.id: ebb-cli-test\n"
                      "request.timeout.ms=5000\n"
                      "security.protocol=PLAINTEXT\n"
                      "linger.ms=5\n")
    async with Admin(bootstrap) as admin:
        await filled_topic(admin, "cli-config")
        out = ebb("delete-records", "--command-config", config, "--topic", "cli-config", "--before-offset", 2)
        assert out.returncode == 0, out.stderr
        assert out.stderr.strip() == f"ebb: --command-config {config}: linger.ms is not used by ebb's client; ignored"
        assert await earliest(admin, "cli-config", 1) == {0: 2}


def _run_with_terminal_stderr(*args) -> tuple[int, str, str]:
    """Run `ebb` with stderr on a pseudo-terminal (stdout piped); returns (code, stdout, what the tty saw)."""
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen([*EBB, *map(str, args)], stdout=subprocess.PIPE, stderr=terminal, text=True)
    finally:
        os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO once the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(controller)
    stdout, _ = process.communicate(timeout=120)
    return process.returncode, stdout, seen.decode(errors="replace")


async def test_progress_bar_only_when_stderr_is_a_terminal(bootstrap):
    async with Admin(bootstrap) as admin:
        await filled_topic(admin, "cli-many", partitions=12, records=5)
    piped = ebb("delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-many", "--before-offset", 1)
    assert piped.returncode == 0 and piped.stderr == ""
    code, stdout, terminal = _run_with_terminal_stderr(
        "delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-many", "--before-offset", 2)
    assert code == 0
    assert "deleting records [" in terminal and "12/12 partitions" in terminal
    assert terminal.endswith("\r\x1b[K")  # the bar is erased at the end
    assert len(table(stdout, 6)) == 12
    code, _, terminal = _run_with_terminal_stderr(  # few partitions: no bar even on a terminal
        "delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-many", "--partition", 0,
        "--before-offset", 3)
    assert code == 0 and terminal == ""


async def test_progress_moves_through_many_partitions_of_one_broker_and_stays_out_of_json(bootstrap):
    """Issue 27: 250 partitions on one broker go in three requests, the bar showing each step; with
    --output json there is no bar, even on a terminal; deleting the topic shows its time on a terminal."""
    async with Admin(bootstrap) as admin:
        await filled_topic(admin, "cli-wide", partitions=250, records=3)
    code, stdout, terminal = _run_with_terminal_stderr(
        "delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-wide", "--before-offset", 1)
    assert code == 0 and len(table(stdout, 6)) == 250
    assert [f"{done}/250 partitions" in terminal for done in (0, 100, 200, 250)] == [True] * 4
    code, stdout, terminal = _run_with_terminal_stderr(
        "delete-records", "--bootstrap-server", bootstrap, "--topic", "cli-wide", "--before-offset", 2,
        "--output", "json")
    assert code == 0 and terminal == "" and len(json.loads(stdout)["partitions"]) == 250
    code, stdout, terminal = _run_with_terminal_stderr(
        "topics", "delete", "--bootstrap-server", bootstrap, "--topic", "cli-wide")
    assert code == 0 and table(stdout, 3) == [["cli-wide", "deleted", "-"]]
    assert terminal.startswith("\rdeleting 1 topic(s) of 250 partitions, 0 s") and terminal.endswith("\r\x1b[K")


# -- topics, configs, offsets --


async def test_topics(bootstrap):
    out = ebb("topics", "create", "--bootstrap-server", bootstrap, "--topic", "cli-topic", "--partitions", 3,
              "--config", "retention.ms=3600000,cleanup.policy=[compact,delete]")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "created topic 'cli-topic'"
    again = ebb("topics", "create", "--bootstrap-server", bootstrap, "--topic", "cli-topic")
    assert again.returncode == 2 and "topic 'cli-topic' already exists" in again.stderr
    tolerant = ebb("topics", "create", "--bootstrap-server", bootstrap, "--topic", "cli-topic", "--if-not-exists")
    assert tolerant.returncode == 0
    no_partitions = ebb("topics", "create", "--bootstrap-server", bootstrap, "--topic", "x", "--partitions", 0)
    assert no_partitions.returncode == 2 and "at least one partition" in no_partitions.stderr

    listed = ebb("topics", "list", "--bootstrap-server", bootstrap)
    assert listed.returncode == 0 and "cli-topic" in listed.stdout.split()
    assert "cli-topic" in json.loads(ebb("topics", "list", "--bootstrap-server", bootstrap, "--output",
                                         "json").stdout)["topics"]

    described = ebb("topics", "describe", "--bootstrap-server", bootstrap, "--topic", "cli-topic", "--output", "json")
    assert described.returncode == 0, described.stderr
    [topic] = json.loads(described.stdout)["topics"]
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in topic["partitions"]] == [
        (p, 1, [1], [1]) for p in range(3)]
    text = ebb("topics", "describe", "--bootstrap-server", bootstrap, "--topic", "cli-topic")
    assert [row[0] for row in table(text.stdout, 9)] == ["cli-topic"] * 3
    unknown = ebb("topics", "describe", "--bootstrap-server", bootstrap, "--topic", "no-such-topic")
    assert unknown.returncode == 2 and "topic 'no-such-topic' does not exist" in unknown.stderr

    async with Admin(bootstrap) as admin:
        configs = await admin.describe_configs("cli-topic", ["retention.ms", "cleanup.policy"])
        assert (configs["retention.ms"].value, configs["cleanup.policy"].value) == ("3600000", "compact,delete")

        # One unknown topic in the list: refused before anything is deleted.
        partial = ebb("topics", "delete", "--bootstrap-server", bootstrap, "--topic", "cli-topic",
                      "--topic", "no-such-topic")
        assert partial.returncode == 2 and "no-such-topic" in partial.stderr
        assert "cli-topic" in await admin.list_topics()

        deleted = ebb("topics", "delete", "--bootstrap-server", bootstrap, "--topic", "cli-topic", "--topic",
                      "no-such-topic", "--if-exists", "--output", "json")
        assert deleted.returncode == 0, deleted.stderr
        assert json.loads(deleted.stdout)["topics"] == [
            {"topic": "cli-topic", "status": "deleted", "error": None},
            {"topic": "no-such-topic", "status": "absent", "error": None}]
        assert "cli-topic" not in await admin.list_topics()


async def test_configs(bootstrap):
    async with Admin(bootstrap) as admin:
        await admin.create_topic("cli-cfg", configs={"retention.ms": "3600000"})
    described = ebb("configs", "describe", "--bootstrap-server", bootstrap, "--topic", "cli-cfg")
    assert described.returncode == 0, described.stderr
    assert table(described.stdout, 5) == [["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG", "no", "no"]]

    altered = ebb("configs", "alter", "--bootstrap-server", bootstrap, "--topic", "cli-cfg",
                  "--add-config", "segment.ms=60000,cleanup.policy=[compact,delete]", "--delete-config", "retention.ms")
    assert altered.returncode == 0, altered.stderr
    doc = json.loads(ebb("configs", "describe", "--bootstrap-server", bootstrap, "--topic", "cli-cfg",
                         "--output", "json").stdout)
    assert {c["name"]: c["value"] for c in doc["configs"]} == {"cleanup.policy": "compact,delete",
                                                               "segment.ms": "60000"}
    everything = json.loads(ebb("configs", "describe", "--bootstrap-server", bootstrap, "--topic", "cli-cfg",
                                "--all", "--output", "json").stdout)
    sources = {c["name"]: c["source"] for c in everything["configs"]}
    assert sources["retention.ms"] == "DEFAULT_CONFIG" and sources["segment.ms"] == "DYNAMIC_TOPIC_CONFIG"

    invalid = ebb("configs", "alter", "--bootstrap-server", bootstrap, "--topic", "cli-cfg",
                  "--add-config", "retention.ms=soon")
    assert invalid.returncode == 1 and "INVALID_CONFIG" in invalid.stderr
    for args, message in [
        (("--topic", "no-such-topic", "--add-config", "retention.ms=1"), "topic 'no-such-topic' does not exist"),
        (("--topic", "cli-cfg", "--add-config", "retention.ms"), "'retention.ms' is not key=value"),
        (("--topic", "cli-cfg", "--add-config", "a=[1,2"), "unbalanced '['"),
        (("--topic", "cli-cfg",), "nothing to change"),
        (("--topic", "cli-cfg", "--add-config", "segment.ms=1", "--delete-config", "segment.ms"),
         "segment.ms is both added and deleted"),
        (("--broker", "42", "--add-config", "x=1"), "broker 42 is not in the cluster"),
    ]:
        out = ebb("configs", "alter", "--bootstrap-server", bootstrap, *args)
        assert out.returncode == 2 and message in out.stderr, (args, out.stderr)
    broker = json.loads(ebb("configs", "describe", "--bootstrap-server", bootstrap, "--broker", "1", "--all",
                            "--output", "json").stdout)
    assert any(c["name"] == "log.retention.hours" for c in broker["configs"])


def test_dynamic_broker_configs(bootstrap):
    """--broker-defaults and --broker alter what every broker, or one, has in force at once."""
    def configs(*which: str) -> dict:
        out = ebb("configs", "describe", "--bootstrap-server", bootstrap, *which, "--output", "json")
        assert out.returncode == 0, out.stderr
        return {c["name"]: (c["value"], c["source"]) for c in json.loads(out.stdout)["configs"]}

    out = ebb("configs", "alter", "--bootstrap-server", bootstrap, "--broker-defaults", "--add-config",
              "log.retention.ms=3600000")
    assert out.returncode == 0, out.stderr
    assert configs("--broker-defaults") == {"log.retention.ms": ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")}
    out = ebb("configs", "alter", "--bootstrap-server", bootstrap, "--broker", "1", "--add-config",
              "message.max.bytes=2000000")
    assert out.returncode == 0, out.stderr
    assert configs("--broker", "1") == {"log.retention.ms": ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
                                        "message.max.bytes": ("2000000", "DYNAMIC_BROKER_CONFIG")}
    out = ebb("configs", "alter", "--bootstrap-server", bootstrap, "--broker", "1", "--add-config", "log.dirs=/x")
    assert out.returncode == 1 and "Cannot update these configs dynamically: [log.dirs]" in out.stderr
    for which, key in ((("--broker-defaults",), "log.retention.ms"), (("--broker", "1"), "message.max.bytes")):
        out = ebb("configs", "alter", "--bootstrap-server", bootstrap, *which, "--delete-config", key)
        assert out.returncode == 0, out.stderr
    assert configs("--broker", "1") == {}


async def test_offsets(bootstrap):
    t0 = int(time.time() * 1000) - 60_000
    async with Admin(bootstrap) as admin:
        await admin.create_topic("cli-offsets", num_partitions=2)
        async with Producer(admin.cluster) as producer:
            await producer.send("cli-offsets", 0, [NewRecord(None, b"%d" % i, (), t0 + 10 * i) for i in range(5)])
        await admin.delete_records({("cli-offsets", 0): 1})
    out = ebb("offsets", "--bootstrap-server", bootstrap, "--topic", "cli-offsets")
    assert out.returncode == 0, out.stderr
    assert table(out.stdout, 5) == [["cli-offsets", "0", "1", "5", "-"], ["cli-offsets", "1", "0", "0", "-"]]

    by_time = json.loads(ebb("offsets", "--bootstrap-server", bootstrap, "--topic", "cli-offsets", "--partition", 0,
                             "--time", iso(t0 + 25), "--output", "json").stdout)
    assert by_time["partitions"] == [{"topic": "cli-offsets", "partition": 0, "offset": 3, "timestamp": t0 + 30,
                                      "error": None}]
    newest = json.loads(ebb("offsets", "--bootstrap-server", bootstrap, "--topic", "cli-offsets", "--partition", 0,
                            "--time", "max-timestamp", "--output", "json").stdout)
    assert (newest["partitions"][0]["offset"], newest["partitions"][0]["timestamp"]) == (4, t0 + 40)
    none_newer = json.loads(ebb("offsets", "--bootstrap-server", bootstrap, "--topic", "cli-offsets", "--partition",
                                0, "--time", t0 + 41, "--output", "json").stdout)
    assert none_newer["partitions"][0]["offset"] == -1

    for args, message in [(("--topic", "no-such-topic"), "does not exist"),
                          (("--topic", "cli-offsets", "--partition", 5), "has no partition 5"),
                          (("--topic", "cli-offsets", "--time", "noon"), "not a timestamp")]:
        bad = ebb("offsets", "--bootstrap-server", bootstrap, *args)
        assert bad.returncode == 2 and message in bad.stderr, (args, bad.stderr)

