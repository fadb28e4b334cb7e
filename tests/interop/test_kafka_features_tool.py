"""Kafka's own `kafka-features` (4.3.1's FeatureCommand) prints the same against Ebb as against Apache
Kafka 4.3.1, for transaction.version and group.version (the features Ebb serves) and a name neither
knows: describe, upgrade, downgrade (safe and --unsafe), disable, each also with --dry-run, the
refusals (a level out of range, a downgrade to a newer level, an unknown feature) and their exit
codes, with the finalized level followed between the runs. describe is compared on its
transaction.version and group.version lines (group.version disabled, then upgraded again), their
Epoch masked (Kafka's metadata offset, Ebb's node version; Kafka also lists its KRaft features,
broker/features.py). The runs share one JVM per broker (ebb.interop.FeatureTool)."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.interop.conftest import on_ebb_and_kafka

pytestmark = pytest.mark.timeout(300)

RUNS = [
    ["describe"],
    ["upgrade", "--feature", "transaction.version=2", "--dry-run"],
    ["upgrade", "--feature", "transaction.version=3"],
    ["downgrade", "--feature", "transaction.version=1", "--dry-run"],
    ["downgrade", "--feature", "transaction.version=1"],
    ["describe"],
    ["downgrade", "--feature", "transaction.version=2"],
    ["upgrade", "--feature", "transaction.version=2", "--feature", "no.such.feature=1"],
    ["upgrade", "--feature", "transaction.version=2"],
    ["describe"],
    ["downgrade", "--unsafe", "--feature", "transaction.version=1"],
    ["disable", "--feature", "transaction.version", "--dry-run"],
    ["disable", "--feature", "no.such.feature"],
    ["upgrade", "--feature", "transaction.version=2"],
    ["describe"],
    ["upgrade", "--feature", "group.version=2"],
    ["disable", "--feature", "group.version"],
    ["describe"],
    ["upgrade", "--feature", "group.version=1", "--dry-run"],
    ["upgrade", "--feature", "group.version=1"],
    ["describe"],
]


def _printed(java, bootstrap: str) -> list[tuple[str, int, list[str]]]:
    lines = "".join("\t".join(["--bootstrap-server", bootstrap, *run]) + "\n" for run in RUNS)
    done = subprocess.run(java.command("ebb.interop.FeatureTool"), input=lines, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    found: list[tuple[str, int, list[str]]] = []
    for run, block in zip(RUNS, done.stdout.split("## end\n"), strict=False):
        head, *printed = block.splitlines()
        assert head.startswith("## exit "), block
        if run[0] == "describe":
            printed = [re.sub(r"Epoch:\s*\d+", "Epoch: <epoch>", " ".join(line.split()))
                       for line in printed if "transaction.version" in line or "group.version" in line]
        found.append((" ".join(run), int(head.removeprefix("## exit ")), printed))
    assert len(found) == len(RUNS), done.stdout[-3000:]
    return found


def test_kafka_features_prints_the_same_against_ebb_and_kafka(java, tmp_path_factory):
    ours, theirs = on_ebb_and_kafka(tmp_path_factory, lambda server, _: _printed(java, server.bootstrap))
    differing = [f"{run}:\n  Ebb:   {o}\n  Kafka: {t}"
                 for (run, *o), (_, *t) in zip(ours, theirs, strict=True) if o != t]
    assert not differing, "\n".join(differing)
    assert {code for _, code, _ in theirs} == {0, 1}  # both successes and refusals were seen
    assert all(printed for _, _, printed in theirs)  # each run printed its line (describe: transaction.version)
    assert all(len(printed) == 2 for run, _, printed in theirs if run == "describe")  # and group.version
