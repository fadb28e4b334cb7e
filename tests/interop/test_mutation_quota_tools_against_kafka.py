"""kafka-topics under a controller_mutation_rate prints the same against Ebb as against Kafka 4.3.1: the
tool's client id (client.id in its --command-config) gets 1 partition/s, a bucket of 11
(controller.quota.window.num 11 x 1 s); a topic of 20 partitions is created whole, which leaves the
bucket 9 below zero for 9 s, so the next creation, the deletion and the growth the tool asks for
meanwhile are refused with THROTTLING_QUOTA_EXCEEDED (the tool does not retry them: KIP-599's
retryOnQuotaViolation is off in kafka-topics), and a client under no quota is not held back. The growth
comes last: kafka-topics --alter returns only once the throttle time it was given is over (against
both brokers), when the bucket is back at zero."""

from __future__ import annotations

import pytest

from protocol.messages import DescribeClientQuotasRequest as Describe
from tests.broker.wire_client import WireClient
from tests.interop.conftest import on_ebb_and_kafka
from tests.interop.test_tools import TOPICS
from tests.interop.test_tools_against_kafka import CONFIGS, normalise
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

CLIENT = "quota-tool"
SESSION = [  # (label, tool, arguments, with the quota'd client's --command-config)
    ("set the quota", CONFIGS, ["--alter", "--entity-type", "clients", "--entity-name", CLIENT, "--add-config",
                                "controller_mutation_rate=1"], False),
    ("create past the burst", TOPICS, ["--create", "--topic", "q-big", "--partitions", "20",
                                       "--replication-factor", "1"], True),
    ("create over the quota", TOPICS, ["--create", "--topic", "q-small", "--partitions", "1"], True),
    ("delete over the quota", TOPICS, ["--delete", "--topic", "q-big"], True),
    ("grow over the quota", TOPICS, ["--alter", "--topic", "q-big", "--partitions", "21"], True),
    ("another client", TOPICS, ["--create", "--topic", "q-free", "--partitions", "1"], False),
    ("the topics", TOPICS, ["--list", "--exclude-internal"], False),
]


def _quota_in_force(bootstrap: str) -> bool:
    with WireClient(int(bootstrap.rsplit(":", 1)[1]), timeout=30) as client:
        return len(client.send(Describe(components=[], strict=False), 1).entries) == 1


def play(java, bootstrap: str, workdir) -> dict[str, tuple[int, list[str]]]:
    properties = workdir / "client.properties"
    properties.write_text(f"client.id={CLIENT}\n")
    answers = {}
    for label, main, args, quotaed in SESSION:
        if label == "create past the burst":  # Kafka applies the quota once its metadata log reaches the broker
            wait_for(lambda: _quota_in_force(bootstrap), what="the quota in force")
        run = java.tool(bootstrap, main, *args, *(["--command-config", str(properties)] if quotaed else []))
        answers[label] = (run.returncode, normalise(run.stdout + run.stderr, bootstrap))
    return answers


@pytest.fixture(scope="module")
def sessions(java, tmp_path_factory) -> tuple[dict, dict]:
    return on_ebb_and_kafka(tmp_path_factory, lambda server, workdir: play(java, server.bootstrap, workdir))


@pytest.mark.parametrize("label", [label for label, _, _, _ in SESSION])
def test_kafka_topics_prints_what_it_prints_against_kafka(sessions, label):
    ours, theirs = sessions[0][label], sessions[1][label]
    assert ours == theirs, f"{label}:\nEbb:   {ours}\nKafka: {theirs}"
    if label.endswith("over the quota"):
        assert ours[0] != 0 and any("The throttling quota has been exceeded." in line for line in ours[1]), ours
