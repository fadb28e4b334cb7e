"""kafka-client-metrics.sh (Kafka's ClientMetricsCommand) and kafka-configs.sh --entity-type
client-metrics print the same lines against Ebb as against Apache Kafka 4.3.1 itself.

One operator's session (alter, describe, list, delete, a generated name, the refusals of a bad interval,
selector, regex and config name) is played against a fresh Ebb broker and a fresh Kafka node (KRaft,
from the pinned jars); each call's exit code and printed lines are compared after normalising what is
each broker's own (its address, a generated name). Kafka applies an alteration once its metadata log
reaches the broker, so before a call that reads one back the subscriptions are awaited as they must be.
"""

from __future__ import annotations

import re

import pytest

from protocol.enums import ConfigSource
from protocol.messages import DescribeConfigsRequest, ListConfigResourcesRequest
from tests.broker.wire_client import WireClient
from tests.interop.conftest import on_ebb_and_kafka
from tests.interop.test_tools_against_kafka import CONFIGS, normalise
from tests.support.polling import wait_for

CLIENT_METRICS = "org.apache.kafka.tools.ClientMetricsCommand"
ENTITY = ["--entity-type", "client-metrics"]

# (label, tool class, arguments)
SESSION = [
    ("alter", CLIENT_METRICS, ["--alter", "--name", "sub1", "--metrics",
                               "org.apache.kafka.producer.,org.apache.kafka.consumer.", "--interval", "1000",
                               "--match", "client_software_name=kafka-python,client_id=.*"]),
    ("describe", CLIENT_METRICS, ["--describe", "--name", "sub1"]),
    ("alter the interval alone", CLIENT_METRICS, ["--alter", "--name", "sub1", "--interval", "60000"]),
    ("describe every one", CLIENT_METRICS, ["--describe"]),
    ("list", CLIENT_METRICS, ["--list"]),
    ("a generated name", CLIENT_METRICS, ["--alter", "--generate-name", "--metrics", "*"]),
    ("list with the generated one", CLIENT_METRICS, ["--list"]),
    ("an interval too short", CLIENT_METRICS, ["--alter", "--name", "sub1", "--interval", "50"]),
    ("an unknown selector", CLIENT_METRICS, ["--alter", "--name", "sub1", "--match", "client_name=x"]),
    ("a bad regex", CLIENT_METRICS, ["--alter", "--name", "sub1", "--match", "client_id=[a"]),
    ("describe a missing one", CLIENT_METRICS, ["--describe", "--name", "never-was"]),
    ("delete", CLIENT_METRICS, ["--delete", "--name", "sub1"]),
    ("describe after delete", CLIENT_METRICS, ["--describe", "--name", "sub1"]),
    ("delete a missing one", CLIENT_METRICS, ["--delete", "--name", "never-was"]),
    ("configs alter", CONFIGS, [*ENTITY, "--entity-name", "sub2", "--alter", "--add-config",
                                "metrics=[a.b,c.d],interval.ms=5000,match=[client_source_port=9092]"]),
    ("configs describe", CONFIGS, [*ENTITY, "--entity-name", "sub2", "--describe"]),
    ("configs describe all", CONFIGS, [*ENTITY, "--entity-name", "sub2", "--describe", "--all"]),
    ("configs unknown name", CONFIGS, [*ENTITY, "--entity-name", "sub2", "--alter", "--add-config", "nope=1"]),
    ("configs interval too long", CONFIGS, [*ENTITY, "--entity-name", "sub2", "--alter", "--add-config",
                                            "interval.ms=3600001"]),
    ("configs delete one", CONFIGS, [*ENTITY, "--entity-name", "sub2", "--alter", "--delete-config", "interval.ms"]),
    ("configs describe after delete", CONFIGS, [*ENTITY, "--entity-name", "sub2", "--describe"]),
    ("the tool describes it", CLIENT_METRICS, ["--describe", "--name", "sub2"]),
]

# Before these calls: each named subscription's own configs as they must be ({}: none).
SETTLED: dict[str, dict[str, dict[str, str]]] = {
    "describe": {"sub1": {"metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.", "interval.ms": "1000",
                          "match": "client_software_name=kafka-python,client_id=.*"}},
    "describe every one": {"sub1": {"interval.ms": "60000"}},
    "describe after delete": {"sub1": {}},
    "configs describe": {"sub2": {"metrics": "a.b,c.d", "interval.ms": "5000", "match": "client_source_port=9092"}},
    "configs describe after delete": {"sub2": {"metrics": "a.b,c.d", "match": "client_source_port=9092"}},
}
LISTED = {"list": 1, "list with the generated one": 2}  # how many subscriptions are listed by then
GENERATED = re.compile(r"Altered client metrics config for ([\w-]{22})\.")  # a random Uuid, base64


def own_configs(port: int, name: str) -> dict[str, str]:
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=16, resource_name=name, configuration_keys=None)])
    with WireClient(port, timeout=30) as client:
        [result] = client.send(request, 4).results
    return {c.name: c.value for c in result.configs if c.config_source == ConfigSource.CLIENT_METRICS_CONFIG}


def listed(port: int) -> int:
    with WireClient(port, timeout=30) as client:
        return len(client.send(ListConfigResourcesRequest(), 0).config_resources)


def play(java, bootstrap: str) -> dict[str, tuple[int, list[str]]]:
    port = int(bootstrap.rsplit(":", 1)[1])
    answers = {}
    generated = None
    for label, main, args in SESSION:
        for name, expected in SETTLED.get(label, {}).items():
            wait_for(lambda name=name, expected=expected: {k: v for k, v in own_configs(port, name).items()
                                                           if k in expected or not expected} == expected,
                     what=f"{label}: {name} in force")
        if label in LISTED:
            wait_for(lambda count=LISTED[label]: listed(port) == count, what=f"{label}: subscriptions listed")
        run = java.tool(bootstrap, main, *args)
        lines = normalise(run.stdout + run.stderr, bootstrap)
        if label == "a generated name" and (found := GENERATED.fullmatch(lines[0] if lines else "")):
            generated = found.group(1)
        if generated:
            lines = [line.replace(generated, "<generated>") for line in lines]
        if label.startswith("list"):  # Kafka lists them in its hash map's order
            lines.sort()
        answers[label] = (run.returncode, lines)
    return answers


@pytest.fixture(scope="module")
def sessions(java, tmp_path_factory) -> tuple[dict, dict]:
    return on_ebb_and_kafka(tmp_path_factory, lambda server, _: play(java, server.bootstrap))


@pytest.mark.parametrize("label", [label for label, _, _ in SESSION])
def test_the_tool_prints_what_it_prints_against_kafka(sessions, label):
    ours, theirs = (side[label] for side in sessions)
    assert ours == theirs, f"{label}:\nEbb:   {ours}\nKafka: {theirs}"
