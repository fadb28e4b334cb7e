"""Checkpoint files: Kafka's text formats, atomic writes, hand-written files, damage detection."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from broker.log import TopicPartition
from broker.log import checkpoint as ck
from broker.log.common import CorruptCheckpointError


def test_offsets_round_trip(tmp_path: Path) -> None:
    offsets = {
        TopicPartition("orders", 0): 1234,
        TopicPartition("orders", 1): 99,
        TopicPartition("a.b_c-d", 7): 0,
    }
    path = tmp_path / ck.LOG_START_OFFSET_CHECKPOINT
    ck.write_offsets(path, offsets)
    assert ck.read_offsets(path) == offsets
    assert path.read_text() == "0\n3\na.b_c-d 7 0\norders 0 1234\norders 1 99\n"
    assert not (tmp_path / (path.name + ".tmp")).exists()


def test_empty_and_missing_offsets(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    assert ck.read_offsets(path) is None
    ck.write_offsets(path, {})
    assert path.read_text() == "0\n0\n"
    assert ck.read_offsets(path) == {}


def test_hand_written_kafka_offset_checkpoint(tmp_path: Path) -> None:
    # The example in the protocol reference, as Kafka writes it, plus tabs and a trailing blank line
    # that a person editing it might leave.
    path = tmp_path / ck.RECOVERY_POINT_CHECKPOINT
    path.write_text("0\n2\nmy-topic 0 1234\nmy-topic\t1   99\n\n")
    assert ck.read_offsets(path) == {TopicPartition("my-topic", 0): 1234, TopicPartition("my-topic", 1): 99}


@pytest.mark.parametrize(
    "text",
    [
        "1\n1\nt 0 5\n",  # unknown version
        "0\n2\nt 0 5\n",  # count says 2, one entry
        "0\n1\nt 0 5\nt 1 6\n",  # count says 1, two entries
        "0\n1\nt 0\n",  # two tokens
        "0\n1\nt x 5\n",  # partition not a number
        "0\n",  # no count
        "zero\n0\n",  # version not a number
        "",  # empty file
    ],
)
def test_damaged_offset_checkpoints_are_detected(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError):
        ck.read_offsets(path)


def test_non_utf8_checkpoint_is_damaged(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff 0 1\n")
    with pytest.raises(CorruptCheckpointError):
        ck.read_offsets(path)


def test_leader_epochs_round_trip_and_kafka_example(tmp_path: Path) -> None:
    path = tmp_path / ck.LEADER_EPOCH_CHECKPOINT
    ck.write_leader_epochs(path, [(0, 0), (3, 1500)])
    assert path.read_text() == "0\n2\n0 0\n3 1500\n"
    assert ck.read_leader_epochs(path) == [(0, 0), (3, 1500)]
    path.write_text("0\n2\n5 10\n4 20\n")  # epochs must increase
    with pytest.raises(CorruptCheckpointError):
        ck.read_leader_epochs(path)
    assert ck.read_leader_epochs(tmp_path / "missing") is None


def test_partition_metadata_matches_kafka_uuid_text(tmp_path: Path) -> None:
    # Kafka's Uuid.toString is URL-safe base64 without padding: 22 characters.
    topic_id = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    path = tmp_path / ck.PARTITION_METADATA
    ck.write_partition_metadata(path, topic_id)
    text = path.read_text()
    assert text == "version: 0\ntopic_id: Dx4tPEtaaXiHlqW0w9Lh8A\n"
    assert ck.read_partition_metadata(path) == topic_id
    # Written by hand the way Kafka does.
    path.write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n")
    assert ck.read_partition_metadata(path) == uuid.UUID(int=1)
    for bad in (
        "version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n",
        "version: 0\n",
        "garbage\n",
        "version: 0\ntopic_id: short\n",
    ):
        path.write_text(bad)
        with pytest.raises(CorruptCheckpointError):
            ck.read_partition_metadata(path)


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    assert ck.read_clean_shutdown(tmp_path) is False
    ck.write_clean_shutdown(tmp_path, broker_epoch=7)
    assert (tmp_path / ck.CLEAN_SHUTDOWN_FILE).read_text() == '{"version": 0, "brokerEpoch": 7}'
    assert ck.read_clean_shutdown(tmp_path) is True
    (tmp_path / ck.CLEAN_SHUTDOWN_FILE).write_text('{"version":0,"brokerEpoch":-1}')  # Kafka's spacing
    assert ck.read_clean_shutdown(tmp_path) is True
    ck.remove_clean_shutdown(tmp_path)
    assert ck.read_clean_shutdown(tmp_path) is False
    (tmp_path / ck.CLEAN_SHUTDOWN_FILE).write_text("{not json")
    with pytest.raises(CorruptCheckpointError):
        ck.read_clean_shutdown(tmp_path)


def test_atomic_write_keeps_old_content_when_tmp_is_left_behind(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    ck.write_offsets(path, {TopicPartition("t", 0): 1})
    # A crash between writing the tmp file and the rename leaves the old file intact.
    (tmp_path / "cp.tmp").write_text("0\n1\nt 0 ")
    assert ck.read_offsets(path) == {TopicPartition("t", 0): 1}
    ck.write_offsets(path, {TopicPartition("t", 0): 2})
    assert ck.read_offsets(path) == {TopicPartition("t", 0): 2}
    assert sorted(os.listdir(tmp_path)) == ["cp"]
