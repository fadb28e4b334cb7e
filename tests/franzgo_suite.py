"""franz-go's own integration tests against Ebb, and optionally against Apache Kafka 4.3.1 beside it:

    .venv/bin/python -m tests.franzgo_suite [--version v1.22.3] [--run REGEX] [--kafka] [--records N]

Not part of `make test` (the kgo suite takes minutes: about 2 on Ebb, 6 on Kafka, here). It fetches the module with
`go mod download` (Go module proxy), copies it to a scratch dir and runs `go test -count=1 -v ./pkg/kgo/`
with the environment franz-go's own CI gives it against Kafka: KGO_SEEDS, KGO_TEST_RF=1,
KGO_TEST_STABLE_FETCH, and a SASL_PLAINTEXT listener for KGO_TEST_SCRAM_SEEDS (SCRAM-SHA-256 user
testuser:testpass) and KGO_TEST_OAUTH_SEEDS (OAUTHBEARER, Kafka's unsecured validator). Each broker
starts with the settings of that CI (transaction and offsets topics with one replica,
group.initial.rebalance.delay.ms=0, auto topic creation). pkg/kadm is its own module and holds unit tests
only. Prints each top-level test's result per broker, and the tests that pass on Kafka and not on Ebb.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from client.admin import Admin
from client.scram_users import set_scram_password
from tests.support.broker_process import BrokerProcess, free_port

MODULE = "github.com/twmb/franz-go"
USER, PASSWORD = "testuser", "testpass"
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredLoginStringClaim_sub="admin";')
CI_SETTINGS = {"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
               "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0",
               "auto.create.topics.enable": "true"}
# Share groups (KIP-932) as franz-go's CI sets them on Kafka; Ebb serves share groups without a switch.
SHARE_SETTINGS = {"group.share.delivery.count.limit": "10"}
RESULT = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+)", re.M)


def sasl_settings(sasl_port: int, plain_port: int) -> dict[str, str]:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
    }


def module_source(version: str, scratch: Path) -> Path:
    out = subprocess.run(["go", "mod", "download", "-json", f"{MODULE}@{version}"], capture_output=True,
                         text=True, check=True)
    source = scratch / "franz-go"
    shutil.copytree(json.loads(out.stdout)["Dir"], source)
    for path in [source, *source.rglob("*")]:  # the module cache is read-only
        path.chmod(path.stat().st_mode | 0o200)
    return source


async def add_scram_user(bootstrap: str) -> None:
    async with Admin(bootstrap) as admin:
        await set_scram_password(admin, USER, "SCRAM-SHA-256", PASSWORD)


def run_suite(source: Path, plain: str, sasl: str, pattern: str, records: int | None, log: Path) -> dict[str, str]:
    env = {**os.environ, "KGO_SEEDS": plain, "KGO_TEST_RF": "1", "KGO_TEST_STABLE_FETCH": "true",
           "KGO_TEST_SCRAM_SEEDS": sasl, "KGO_TEST_SCRAM": f"{USER}:{PASSWORD}", "KGO_TEST_OAUTH_SEEDS": sasl}
    if records:
        env["KGO_TEST_RECORDS"] = str(records)
    with open(log, "w") as out:
        subprocess.run(["go", "test", "-count=1", "-v", "-timeout", "20m", "-run", pattern, "./pkg/kgo/"],
                       cwd=source, env=env, stdout=out, stderr=subprocess.STDOUT)
    return {name: result for result, name in RESULT.findall(log.read_text())}


def on_ebb(source: Path, scratch: Path, args) -> dict[str, str]:
    plain, sasl = free_port(), free_port()
    with BrokerProcess(scratch / "ebb", {**CI_SETTINGS, **SHARE_SETTINGS, **sasl_settings(sasl, plain)},
                       port=plain) as broker:
        asyncio.run(add_scram_user(broker.bootstrap))
        return run_suite(source, broker.bootstrap, f"127.0.0.1:{sasl}", args.run, args.records, scratch / "ebb.log")


def on_kafka(source: Path, scratch: Path, args) -> dict[str, str]:
    from tests.interop.conftest import TARGET, build
    from tests.support.kafka_node import KafkaNode
    build()
    kafka = KafkaNode(scratch / "kafka", f"{TARGET / 'lib'}/*", {
        **CI_SETTINGS, "sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "inter.broker.listener.name": "PLAINTEXT",
        # franz-go's CI runs Kafka's share groups (KIP-932) too (Ebb gets the delivery limit: SHARE_SETTINGS)
        "group.coordinator.rebalance.protocols": "classic,consumer,share",
        "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "5", **SHARE_SETTINGS})
    sasl = free_port()
    props = kafka.properties
    props["listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{sasl}"
    props["advertised.listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{sasl}"
    props["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
    with kafka:
        asyncio.run(add_scram_user(kafka.bootstrap))
        return run_suite(source, kafka.bootstrap, f"127.0.0.1:{sasl}", args.run, args.records,
                         scratch / "kafka.log")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="v1.22.3", help="franz-go version (the newest the proxy serves here)")
    parser.add_argument("--run", default=".", help="go test -run pattern")
    parser.add_argument("--kafka", action="store_true", help="also run against Apache Kafka 4.3.1")
    parser.add_argument("--records", type=int, help="KGO_TEST_RECORDS (the suite's default is 500000)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="franzgo-"))
    source = module_source(args.version, scratch)
    results = {"ebb": on_ebb(source, scratch, args)}
    if args.kafka:
        results["kafka"] = on_kafka(source, scratch, args)
    names = sorted(set().union(*results.values()))
    print(f"{'test':60} " + " ".join(f"{peer:6}" for peer in results))
    for name in names:
        print(f"{name:60} " + " ".join(f"{results[peer].get(name, '-'):6}" for peer in results))
    for peer, found in results.items():
        counts = {r: sum(1 for v in found.values() if v == r) for r in ("PASS", "FAIL", "SKIP")}
        print(f"{peer}: {counts}; go test output in {scratch / (peer + '.log')}")
    if args.kafka:
        worse = [n for n in names if results["kafka"].get(n) == "PASS" and results["ebb"].get(n) != "PASS"]
        print("pass on Kafka, not on Ebb:", ", ".join(worse) or "none")


if __name__ == "__main__":
    main()
