"""ops/prometheus/alerts.yml, evaluated by Prometheus' own promtool against scrapes of real brokers.

Three brokers on ZooKeeper are brought into the states the rules alert on: a follower stopped with
SIGSTOP (still registered, so the leader waits for it) parks DeleteRecords, lets them expire, makes the
low watermark lag grow with each delete, and drops out of the ISR; a broker stopped for good leaves
the partition only it held offline. Each scrape is replayed to `promtool test rules` as series held
for some minutes, and each alert must fire with exactly the labels it should; the healthy cluster's
scrapes must fire none.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from protocol.errors import ErrorCode
from protocol.messages import CreateTopicsRequest
from tests.broker.data_wire import WireClient, batch, delete_records, produce
from tests.cluster.three_brokers import PARKED_DELETES, leader_of, new_topic, scrape_while_a_delete_parks, three_brokers
from tests.support.broker_process import free_port
from tests.support.metrics_scrape import Samples, scrape, value
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

RULES = Path(__file__).resolve().parents[2] / "ops" / "prometheus" / "alerts.yml"
JOB = "ebb"
UNDER_REPLICATED = "kafka_server_replicamanager_underreplicatedpartitions"
Phase = tuple[dict[str, Samples], int]  # scrapes by instance, held for this many minutes


def promtool() -> str:
    beside = Path(sys.executable).with_name("promtool")
    found = str(beside) if beside.exists() else shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not installed: `make test` puts it in .venv/bin (from Debian's prometheus)")
    return found


def rules() -> dict[str, dict]:
    return {rule["alert"]: rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}


def test_promtool_accepts_the_rules_file():
    checked = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert all(rule.get("for") for rule in rules().values()), "every alert waits for a while before it fires"
    table = (RULES.parents[2] / "docs" / "operations.md").read_text().split("## What to alert on", 1)[1]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| Ebb")}
    assert set(rows) == set(rules()), "docs/operations.md lists exactly the alerts of the rules file"
    for name, rule in rules().items():
        assert f"| {rule['for']} | {rule['labels']['severity']} |" in rows[name], name


def input_series(phases: list[Phase]) -> list[dict[str, str]]:
    """Every series seen in any phase, its value held through each phase (missing where it was not)."""
    keys = sorted({(name, labels, instance) for scrapes, _ in phases
                   for instance, samples in scrapes.items() for name, labels in samples})
    series = []
    for name, labels, instance in keys:
        selector = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted({**dict(labels), "instance": instance,
                                                                          "job": JOB}.items()))
        values = []
        for scrapes, minutes in phases:
            sample = scrapes.get(instance, {}).get((name, labels))
            values.append(f"_x{minutes}" if sample is None else f"{sample!r}+0x{minutes - 1}")
        series.append({"series": f"{name}{{{selector}}}", "values": " ".join(values)})
    return series


def expected(alert: str, **labels: str) -> dict:
    rule = rules()[alert]
    return {"exp_labels": {**rule["labels"], **labels}, "exp_annotations": rule["annotations"]}


def run_promtool(tmp_path: Path, cases: list[dict]) -> None:
    tests = [{"interval": "1m", "input_series": input_series(case["phases"]),
              "alert_rule_test": case["checks"]} for case in cases]
    path = tmp_path / "alerts_test.yml"
    path.write_text(yaml.safe_dump({"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": tests}))
    result = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_each_alert_fires_on_a_cluster_in_its_state_and_none_on_a_healthy_one(zk_connect, tmp_path):
    ports = {n: free_port() for n in (1, 2, 3)}
    extra = {"zookeeper.session.timeout.ms": "60000", "replica.lag.time.max.ms": "2000"}
    metrics = {n: {"ebb.metrics.listener": f"http://127.0.0.1:{port}"} for n, port in ports.items()}

    def url_of(node: int) -> str:
        return f"http://127.0.0.1:{ports[node]}/metrics"

    def scrape_of(node: int) -> Samples:
        return scrape(url_of(node))

    with three_brokers(zk_connect, tmp_path, extra, metrics) as cluster:
        topic = new_topic(cluster)
        leader = leader_of(cluster, topic)
        leader_node = next(n for n, b in cluster.items() if b is leader)
        follower = next(b for b in cluster.values() if b is not leader)
        with WireClient(leader.port) as client:
            assert produce(client, topic, 0, batch([b"v%d" % i for i in range(10)]), acks=-1).error_code == \
                ErrorCode.NONE
        wait_for(lambda: value(scrape_of(leader_node), UNDER_REPLICATED) == 0, what="every partition in sync")
        healthy = {f"broker-{n}": scrape_of(n) for n in cluster}

        def at_leader(samples: Samples) -> dict[str, Samples]:
            return {f"broker-{leader_node}": samples}

        follower.process.send_signal(signal.SIGSTOP)
        try:
            parked = scrape_while_a_delete_parks(leader, url_of(leader_node), topic, 5)
            lag_5 = scrape_of(leader_node)
            with WireClient(leader.port) as client:
                assert delete_records(client, topic, 0, 8, timeout_ms=500).error_code == ErrorCode.REQUEST_TIMED_OUT
            lag_8 = scrape_of(leader_node)
            first = {"topic": topic, "partition": "0"}
            assert [value(s, "kafka_log_log_logstartoffset", **first) - value(s, "ebb_partition_lowwatermark", **first)
                    for s in (lag_5, lag_8)] == [5, 8]
            wait_for(lambda: value(scrape_of(leader_node), UNDER_REPLICATED) >= 1,
                     what="the stopped follower out of the ISR")
            shrunk = scrape_of(leader_node)
        finally:
            follower.process.send_signal(signal.SIGCONT)

        # A partition held by one broker alone, which then stops for good: offline.
        lonely_node = next(n for n in cluster if n != leader_node)
        creatable = CreateTopicsRequest.CreatableTopic
        lonely = creatable(name="alone", num_partitions=-1, replication_factor=-1, assignments=[
            creatable.CreatableReplicaAssignment(partition_index=0, broker_ids=[lonely_node])])
        with WireClient(leader.port) as client:
            [created] = client.send(CreateTopicsRequest(topics=[lonely], timeout_ms=10_000), 7).topics
        assert created.error_code == ErrorCode.NONE, created.error_message
        cluster[lonely_node].stop()
        alive = [n for n in cluster if n != lonely_node]
        wait_for(lambda: sum(value(scrape_of(n), "kafka_controller_kafkacontroller_offlinepartitionscount") or 0
                             for n in alive) >= 1, what="the lonely partition offline")
        offline = {f"broker-{n}": scrape_of(n) for n in alive}

    at_broker = {"instance": f"broker-{leader_node}", "job": JOB}
    partition = {"topic": topic, "partition": "0", **at_broker}
    cases = [
        {"phases": [(healthy, 40)],
         "checks": [{"eval_time": "35m", "alertname": name, "exp_alerts": []} for name in rules()]},
        {"phases": [(at_leader(shrunk), 10)],
         "checks": [{"eval_time": "4m", "alertname": "EbbUnderReplicatedPartitions", "exp_alerts": []},
                    {"eval_time": "6m", "alertname": "EbbUnderReplicatedPartitions",
                     "exp_alerts": [expected("EbbUnderReplicatedPartitions")]}]},
        {"phases": [(at_leader(parked), 10)],
         "checks": [{"eval_time": "6m", "alertname": "EbbDeleteRecordsParked",
                     "exp_alerts": [expected("EbbDeleteRecordsParked", **PARKED_DELETES, **at_broker)]}]},
        {"phases": [(at_leader(healthy[f"broker-{leader_node}"]), 5), (at_leader(lag_5), 5)],
         "checks": [{"eval_time": "7m", "alertname": "EbbDeleteRecordsExpiring",
                     "exp_alerts": [expected("EbbDeleteRecordsExpiring", **PARKED_DELETES, **at_broker)]}]},
        {"phases": [(at_leader(healthy[f"broker-{leader_node}"]), 10), (at_leader(lag_5), 10),
                    (at_leader(lag_8), 10)],
         "checks": [{"eval_time": "20m", "alertname": "EbbLowWatermarkLagGrowing", "exp_alerts": []},
                    {"eval_time": "27m", "alertname": "EbbLowWatermarkLagGrowing",
                     "exp_alerts": [expected("EbbLowWatermarkLagGrowing", **partition)]}]},
        {"phases": [(offline, 5)],
         "checks": [{"eval_time": "3m", "alertname": "EbbOfflinePartitions",
                     "exp_alerts": [expected("EbbOfflinePartitions")]}]},
    ]
    run_promtool(tmp_path, cases)
