"""Our specs of the messages kafka-python 3 does not know (KIP-932's share group APIs) against Kafka
4.3.1's own JSON specs, read from the kafka-clients jar tests/interop/java fetches: the same fields on
the wire at every version both have, in the same order, with the same types, nullability, tags and
defaults (the layout half of test_oracle.py)."""

from __future__ import annotations

import json
import re
import zipfile
from functools import cache

import pytest

from protocol.messages import MESSAGES
from protocol.specs import _build_message
from tests.interop.conftest import KAFKA_VERSION, TARGET, build

from .test_oracle import wire_signature

# The messages checked here instead of by kafka-python (test_oracle.test_oracle_covers_what_we_serve).
KAFKA_ONLY = ("ShareGroupHeartbeatRequest", "ShareGroupHeartbeatResponse", "ShareGroupDescribeRequest",
              "ShareGroupDescribeResponse", "ShareFetchRequest", "ShareFetchResponse", "ShareAcknowledgeRequest",
              "ShareAcknowledgeResponse", "DescribeShareGroupOffsetsRequest", "DescribeShareGroupOffsetsResponse",
              "AlterShareGroupOffsetsRequest", "AlterShareGroupOffsetsResponse", "DeleteShareGroupOffsetsRequest",
              "DeleteShareGroupOffsetsResponse", "ReadShareGroupStateRequest", "ReadShareGroupStateResponse",
              "WriteShareGroupStateRequest", "WriteShareGroupStateResponse", "DeleteShareGroupStateRequest",
              "DeleteShareGroupStateResponse", "InitializeShareGroupStateRequest", "InitializeShareGroupStateResponse",
              "ReadShareGroupStateSummaryRequest", "ReadShareGroupStateSummaryResponse",
              "ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse",
              "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse")
_COMMENT = re.compile(r"^\s*//.*$", re.M)


# The share group records of __consumer_offsets, in Kafka's group coordinator jar.
GROUP_RECORDS = tuple(f"ShareGroup{record}{part}" for record in (
    "Metadata", "MemberMetadata", "TargetAssignmentMetadata", "TargetAssignmentMember", "CurrentMemberAssignment",
    "StatePartitionMetadata") for part in ("Key", "Value"))


@cache
def kafka_spec(name: str, jar_name: str = "kafka-clients") -> dict:
    build()  # Maven fetches the jars (cached) unless they are there already
    with zipfile.ZipFile(TARGET / "lib" / f"{jar_name}-{KAFKA_VERSION}.jar") as jar:
        text = jar.read(f"common/message/{name}.json").decode()
    spec = json.loads(_COMMENT.sub("", text))
    _with_abouts([*spec["fields"], *spec.get("commonStructs", [])])
    return spec


def _with_abouts(fields: list[dict]) -> None:
    """Kafka leaves some fields without an `about`, which our spec loader wants (it never reaches the wire)."""
    for f in fields:
        f.setdefault("about", "")
        _with_abouts(f.get("fields", []))


@pytest.mark.parametrize("name", KAFKA_ONLY + GROUP_RECORDS)
def test_same_wire_layout_as_kafkas_own_spec(name):
    ours = MESSAGES[name].spec
    theirs = _build_message(kafka_spec(name, "kafka-group-coordinator" if name in GROUP_RECORDS else "kafka-clients"),
                            name)
    assert list(ours.valid_versions) == list(theirs.valid_versions)
    for version in ours.valid_versions:
        assert (version in ours.flexible_versions) == (version in theirs.flexible_versions)
        flexible = version in ours.flexible_versions
        assert wire_signature(ours.fields, version, flexible) == wire_signature(theirs.fields, version, flexible)
