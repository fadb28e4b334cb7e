"""kafkajs (Node, from npm) runs the conformance flow (see scenario.py) unmodified.

Each step runs `node js/flows.js <flow> <bootstrap> <topic> ...` and reads one JSON line back.
kafkajs specifics: ApiVersions v2, Metadata v6, Produce v7, Fetch v11 with isolation_level=1,
ListOffsets v3, DeleteRecords v1 (after checking the offset with ListOffsets -2/-1),
DescribeConfigs v2 and the legacy AlterConfigs (33) as its only alter API.

kafkajs has no assign(): its consumers always join a group. The "assigned consumer" here is the
Fetch path its consumers use (the client's own cluster and broker objects), driven per partition.
A fetch below the log start offset throws KafkaJSOffsetOutOfRange (type OFFSET_OUT_OF_RANGE), the
error its consumer catches to reset to the earliest or latest offset.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conformance import scenario
from tests.conformance.scenario import (
    ALTER_KEY,
    ALTER_VALUE,
    DELETE_BEFORE,
    DELETE_PARTITION,
    PARTITIONS,
    SOURCE_DYNAMIC_TOPIC,
    check_default_topic_configs,
)

pytestmark = pytest.mark.timeout(60)

JS_DIR = Path(__file__).parent / "js"
FLOWS = JS_DIR / "flows.js"
NODE_TIMEOUT_S = 30  # flows.js has its own 25 s watchdog


@pytest.fixture(scope="module")
def node():
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: `make test` needs Node.js and npm for kafkajs")
    if not (JS_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        pytest.fail("kafkajs is not installed: run `make test` (it runs `npm ci` in tests/conformance/js)")
    return node


@pytest.fixture(scope="module")
def flow():
    return scenario.new_flow("kafkajs")


@pytest.fixture(scope="module")
def run(node, broker, flow):
    def run(name: str, *args: object, stdin: str | None = None) -> dict:
        cmd = [node, str(FLOWS), name, broker.bootstrap, flow.topic, *map(str, args)]
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=NODE_TIMEOUT_S, cwd=JS_DIR)
        lines = proc.stdout.strip().splitlines()
        assert proc.returncode == 0 and lines, f"{name} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
        out = json.loads(lines[-1])
        out["stderr"] = proc.stderr[-4000:]
        return out

    return run


def ok(out: dict):
    assert out["ok"], f"kafkajs error: {out['error']}\n{out['stderr']}"
    return out["result"]


def offsets(run) -> dict[int, dict]:
    return {int(p["partition"]): p for p in ok(run("offsets"))}


def configs(run) -> dict[str, dict]:
    (resource,) = ok(run("describe-configs"))["resources"]
    assert resource["errorCode"] == 0, resource
    return {e["configName"]: e for e in resource["configEntries"]}


@pytest.mark.apis("CreateTopics", "Metadata")
def test_create_topic(run, flow):
    result = ok(run("create", PARTITIONS))
    assert result["created"] is True
    assert result["partitions"] == list(range(PARTITIONS))
    flow.done.add("create")


@pytest.mark.apis("Produce", "Metadata")
@pytest.mark.parametrize("acks", scenario.ACKS)
def test_produce(run, flow, acks):
    flow.require("create")
    records = [
        {"partition": r.partition, "key": r.key.decode(), "value": r.value.decode(), "timestamp": r.timestamp_ms}
        for r in flow.by_acks(acks)
    ]
    result = ok(run("produce", "1" if acks == "1" else "-1", stdin=json.dumps(records)))
    # One batch per partition; its base offset is where this acks half starts in the partition.
    first = {p: next(i for i, r in enumerate(rs) if r.acks == acks) for p, rs in flow.layout().items()}
    assert {m["partition"]: (m["errorCode"], int(m["baseOffset"])) for m in result} == {
        p: (0, o) for p, o in first.items()
    }
    flow.done.add(f"produce-{acks}")


@pytest.mark.apis("Fetch", "Metadata")
def test_consume_assigned(run, flow):
    flow.require("produce-1", "produce-all")
    start = json.dumps({p: 0 for p in range(PARTITIONS)})
    got = ok(run("fetch", start, len(flow.records)))
    for p, records in flow.layout().items():
        mine = [g for g in got if g["partition"] == p]
        assert [g["offset"] for g in mine] == list(range(len(records))), f"partition {p} offsets"
        assert [g["value"].encode() for g in mine] == [r.value for r in records], f"partition {p} values"
        assert [g["key"].encode() for g in mine] == [r.key for r in records], f"partition {p} keys"
        assert [g["timestamp"] for g in mine] == [r.timestamp_ms for r in records], f"partition {p} timestamps"


@pytest.mark.apis("ListOffsets")
def test_list_offsets_earliest(run, flow):
    flow.require("produce-1", "produce-all")
    assert {p: int(o["low"]) for p, o in offsets(run).items()} == {p: 0 for p in range(PARTITIONS)}


@pytest.mark.apis("ListOffsets")
def test_list_offsets_latest(run, flow):
    flow.require("produce-1", "produce-all")
    assert {p: int(o["high"]) for p, o in offsets(run).items()} == flow.latest()


@pytest.mark.apis("ListOffsets")
def test_list_offsets_by_time(run, flow):
    flow.require("produce-1", "produce-all")
    mid = {int(o["partition"]): int(o["offset"]) for o in ok(run("offsets-by-time", flow.mid_ts_ms))}
    assert mid == {p: flow.offset_for_time(p, flow.mid_ts_ms) for p in range(PARTITIONS)}
    # No record at or after the timestamp: the broker answers -1, which kafkajs replaces with the
    # latest offset (it asks ListOffsets -1 first).
    future = {int(o["partition"]): int(o["offset"]) for o in ok(run("offsets-by-time", flow.future_ts_ms))}
    assert future == flow.latest()


@pytest.mark.apis("DeleteRecords", "ListOffsets")
def test_delete_records(run, flow):
    flow.require("produce-1", "produce-all")
    after = {int(p["partition"]): int(p["low"]) for p in ok(run("delete-records", DELETE_PARTITION, DELETE_BEFORE))}
    assert after == {p: DELETE_BEFORE if p == DELETE_PARTITION else 0 for p in range(PARTITIONS)}
    flow.done.add("delete-records")


@pytest.mark.apis("Fetch", "ListOffsets")
def test_read_below_log_start(run, flow):
    flow.require("delete-records")
    out = run("fetch", json.dumps({DELETE_PARTITION: 0}), 1)
    assert not out["ok"], f"fetch below the log start offset returned {out.get('result')}"
    assert (out["error"]["name"], out["error"]["type"]) == ("KafkaJSOffsetOutOfRange", "OFFSET_OUT_OF_RANGE")

    # What kafkajs' consumer then does: seek to the earliest offset and read on from there.
    low = int(offsets(run)[DELETE_PARTITION]["low"])
    (first,) = ok(run("fetch", json.dumps({DELETE_PARTITION: low}), 1))[:1]
    assert (first["offset"], first["value"].encode()) == (
        DELETE_BEFORE,
        flow.values(DELETE_PARTITION)[DELETE_BEFORE],
    )


@pytest.mark.apis("DescribeConfigs")
def test_describe_configs(run, flow):
    flow.require("create")
    described = configs(run)
    check_default_topic_configs({n: e["configValue"] for n, e in described.items()},
                                {n: e["configSource"] for n, e in described.items()})


@pytest.mark.apis("AlterConfigs", "DescribeConfigs")
def test_alter_configs(run, flow):
    flow.require("create")
    (resource,) = ok(run("alter-configs", ALTER_KEY, ALTER_VALUE))["resources"]
    assert (resource["errorCode"], resource["resourceName"]) == (0, flow.topic), resource
    entry = configs(run)[ALTER_KEY]
    assert (entry["configValue"], entry["configSource"]) == (ALTER_VALUE, SOURCE_DYNAMIC_TOPIC)


@pytest.mark.apis("DeleteTopics", "Metadata")
def test_delete_topic(run, flow):
    flow.require("create")
    assert flow.topic not in ok(run("delete-topic"))
