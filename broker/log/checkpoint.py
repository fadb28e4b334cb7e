"""Checkpoint and metadata files, in Kafka's text formats, written atomically.

Generic checkpoint framing (CheckpointFile.java): line 1 the version, line 2 the entry count N, then
N entry lines, each ending in "\\n". Writers go through `write_atomically`: the content goes to
`<file>.tmp`, is fsynced, renamed over the file, and the directory is fsynced, so after a crash the
file holds either the old or the new content, never a mix.

Every function here blocks (fsync); async callers run them in an executor.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from broker.log.common import TMP_SUFFIX, CorruptCheckpointError, TopicPartition

OFFSET_CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0
CLEAN_SHUTDOWN_VERSION = 0

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_libc = ctypes.CDLL(None, use_errno=True)


def sync_filesystem(directory: Path) -> None:
    """Everything written on `directory`'s filesystem made durable with one syncfs(2): for a batch of
    new files, far cheaper than an fsync of each file and directory."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(directory))
    finally:
        os.close(fd)


def write_atomically(path: Path, content: bytes, *, sync: bool = True, mode: int | None = None) -> None:
    """Replace `path` with `content` (tmp, fsync, rename, fsync the directory: a crash leaves the old
    content or the new one). `mode` sets the permission bits before any byte is written (for secrets)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        # A full disk: the old file stays whole, and the half-written copy must not hold on to space.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


# --- generic framing -----------------------------------------------------------------------------


def format_checkpoint(version: int, entries: Iterable[str]) -> bytes:
    lines = list(entries)
    return "".join(f"{line}\n" for line in [str(version), str(len(lines)), *lines]).encode()


def parse_checkpoint(text: str, version: int, tokens_per_entry: int, source: str) -> list[list[str]]:
    """Entry lines split on whitespace. Raises CorruptCheckpointError as Kafka's reader would fail.

    Blank lines are tolerated (hand-edited files often end with one); every other line counts.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{source}: missing version or entry count")
    try:
        found_version = int(lines[0].strip())
        expected = int(lines[1].strip())
    except ValueError as exc:
        raise CorruptCheckpointError(f"{source}: malformed header {lines[:2]!r}") from exc
    if found_version != version:
        raise CorruptCheckpointError(f"{source}: unrecognised version {found_version}")
    entries = [line.split() for line in lines[2:]]
    for tokens in entries:
        if len(tokens) != tokens_per_entry:
            raise CorruptCheckpointError(f"{source}: malformed entry {' '.join(tokens)!r}")
    if len(entries) != expected:
        raise CorruptCheckpointError(f"{source}: expected {expected} entries, found {len(entries)}")
    return entries


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(f"{path}: not UTF-8") from exc


# --- per-dir offset checkpoints ------------------------------------------------------------------


def format_offsets(offsets: Mapping[TopicPartition, int]) -> bytes:
    entries = (f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items()))
    return format_checkpoint(OFFSET_CHECKPOINT_VERSION, entries)


def parse_offsets(text: str, source: str = "offset checkpoint") -> dict[TopicPartition, int]:
    result: dict[TopicPartition, int] = {}
    for topic, partition, offset in parse_checkpoint(text, OFFSET_CHECKPOINT_VERSION, 3, source):
        try:
            result[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError as exc:
            raise CorruptCheckpointError(f"{source}: malformed entry {topic} {partition} {offset}") from exc
    return result


def read_offsets(path: Path) -> dict[TopicPartition, int] | None:
    """None if the file does not exist; CorruptCheckpointError if it does not parse."""
    try:
        text = _read_text(path)
    except FileNotFoundError:
        return None
    return parse_offsets(text, str(path))


def write_offsets(path: Path, offsets: Mapping[TopicPartition, int], *, sync: bool = True) -> None:
    write_atomically(path, format_offsets(offsets), sync=sync)


# --- per-partition leader epochs -----------------------------------------------------------------


def format_leader_epochs(entries: Iterable[tuple[int, int]]) -> bytes:
    return format_checkpoint(LEADER_EPOCH_CHECKPOINT_VERSION, (f"{e} {o}" for e, o in entries))


def read_leader_epochs(path: Path) -> list[tuple[int, int]] | None:
    try:
        text = _read_text(path)
    except FileNotFoundError:
        return None
    try:
        rows = [
            (int(e), int(o)) for e, o in parse_checkpoint(text, LEADER_EPOCH_CHECKPOINT_VERSION, 2, str(path))
        ]
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: malformed entry") from exc
    for (e1, o1), (e2, o2) in zip(rows, rows[1:], strict=False):
        if e2 <= e1 or o2 < o1:
            raise CorruptCheckpointError(f"{path}: entries not increasing at epoch {e2}")
    return rows


def write_leader_epochs(path: Path, entries: Iterable[tuple[int, int]], *, sync: bool = True) -> None:
    write_atomically(path, format_leader_epochs(entries), sync=sync)


# --- partition.metadata (topic id) ---------------------------------------------------------------


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def topic_id_from_str(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} is not 16 bytes")
    return uuid.UUID(bytes=raw)


def format_partition_metadata(topic_id: uuid.UUID) -> bytes:
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id_to_str(topic_id)}\n".encode()


def read_partition_metadata(path: Path) -> uuid.UUID | None:
    try:
        text = _read_text(path)
    except FileNotFoundError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            key, sep, value = line.partition(":")
            if not sep:
                raise CorruptCheckpointError(f"{path}: malformed line {line!r}")
            fields[key.strip()] = value.strip()
    if fields.get("version") != str(PARTITION_METADATA_VERSION):
        raise CorruptCheckpointError(f"{path}: unrecognised version {fields.get('version')!r}")
    try:
        return topic_id_from_str(fields["topic_id"])
    except (KeyError, ValueError) as exc:
        raise CorruptCheckpointError(f"{path}: bad topic_id") from exc


def write_partition_metadata(path: Path, topic_id: uuid.UUID, *, sync: bool = True) -> None:
    write_atomically(path, format_partition_metadata(topic_id), sync=sync)


# --- clean-shutdown marker -----------------------------------------------------------------------


def write_clean_shutdown(directory: Path, broker_epoch: int = -1) -> None:
    body = json.dumps({"version": CLEAN_SHUTDOWN_VERSION, "brokerEpoch": broker_epoch}).encode()
    write_atomically(directory / CLEAN_SHUTDOWN_FILE, body)


def read_clean_shutdown(directory: Path) -> bool:
    """True if the marker exists and parses. A damaged marker counts as unclean (rescan is safe)."""
    try:
        data = json.loads((directory / CLEAN_SHUTDOWN_FILE).read_bytes())
    except FileNotFoundError:
        return False
    except ValueError as exc:
        raise CorruptCheckpointError(f"{directory / CLEAN_SHUTDOWN_FILE}: not JSON") from exc
    if not isinstance(data, dict) or data.get("version") != CLEAN_SHUTDOWN_VERSION:
        raise CorruptCheckpointError(f"{directory / CLEAN_SHUTDOWN_FILE}: unrecognised content")
    return True


def remove_clean_shutdown(directory: Path) -> None:
    try:
        os.unlink(directory / CLEAN_SHUTDOWN_FILE)
    except FileNotFoundError:
        return
    fsync_dir(directory)
