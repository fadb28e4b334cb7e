"""Kafka's offset JSON for deleting records (kafka-delete-records.sh --offset-json-file):

    {"partitions": [{"topic": "t", "partition": 0, "offset": 3}], "version": 1}

Parsed strictly, before anything is deleted: every problem is reported with where it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from .types import TopicPartition

SUPPORTED_VERSION = 1  # Kafka treats a missing "version" as 1 too


class OffsetsFileError(ValueError):
    """The offset JSON is malformed; the message names the problem."""


def parse_offsets_json(text: str) -> dict[TopicPartition, int]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetsFileError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(doc, dict):
        raise OffsetsFileError("the top level must be an object with a \"partitions\" list")
    version = doc.get("version", SUPPORTED_VERSION)
    if version != SUPPORTED_VERSION or isinstance(version, bool):
        raise OffsetsFileError(f"unsupported \"version\" {version!r}; only {SUPPORTED_VERSION} is known")
    partitions = doc.get("partitions")
    if not isinstance(partitions, list):
        raise OffsetsFileError("missing \"partitions\" list")
    out: dict[TopicPartition, int] = {}
    for index, entry in enumerate(partitions):
        where = f"partitions[{index}]"
        if not isinstance(entry, dict):
            raise OffsetsFileError(f"{where} must be an object with topic, partition and offset")
        topic = entry.get("topic")
        if not isinstance(topic, str) or not topic:
            raise OffsetsFileError(f"{where}: \"topic\" must be a non-empty string")
        partition = _integer(entry, "partition", where)
        offset = _integer(entry, "offset", where)
        if partition < 0:
            raise OffsetsFileError(f"{where}: partition {partition} is negative")
        if offset < -1:
            raise OffsetsFileError(f"{where}: offset {offset} is negative (only -1, the high watermark, is allowed)")
        tp = TopicPartition(topic, partition)
        if tp in out:
            raise OffsetsFileError(f"{where}: {tp} appears more than once")
        out[tp] = offset
    if not out:
        raise OffsetsFileError("\"partitions\" is empty: nothing to delete")
    return out


def dump_offsets_json(offsets: Mapping[tuple[str, int], int]) -> str:
    return json.dumps({
        "partitions": [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(offsets.items())],
        "version": SUPPORTED_VERSION,
    })


def _integer(entry: dict, key: str, where: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise OffsetsFileError(f"{where}: \"{key}\" must be an integer, not {json.dumps(value)}")
    return value
