"""`ebb delete-records`: Kafka's kafka-delete-records.sh, plus leader-only (KIP-1343) and by-timestamp deletion.

    ebb delete-records --bootstrap-server HOST:PORT --offset-json-file offsets.json [--leader-only]
    ebb delete-records --bootstrap-server HOST:PORT --topic T [--partition P] --before-offset N
    ebb delete-records --bootstrap-server HOST:PORT --topic T [--partition P] --before-timestamp 2024-05-01T00:00:00Z
    ebb delete-records ... --wait-erased       # then wait until the bytes are gone from every alive replica

Everything is checked before the first DeleteRecords is sent: the file, the offsets (>= 0 or -1 for
the high watermark, and not above the high watermark), the timestamp, that every topic and partition
exists. Any problem is exit code 2 with nothing deleted.

By timestamp: per partition, ListOffsets finds the first record (lowest offset) whose timestamp is at
or after the time, and records below that offset are deleted. Every deleted record is therefore older
than the time; with out-of-order timestamps, an older record that sits after a newer one is kept
(never delete a record at or after the time). If no record is at or after the time, every record
present is older and the partition is emptied up to the high watermark as it was *before* the
timestamp lookup (an explicit offset, not -1), so records produced meanwhile are never deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import defaultdict
from pathlib import Path

from ..admin import LATEST, Admin
from ..delete_records import DeletedRecords
from ..erasure import wait_erased
from ..offsets_file import OffsetsFileError, parse_offsets_json
from ..types import TopicPartition
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    BadInput,
    Failed,
    check_partitions,
    connect,
    error_text,
    existing_topics,
    parse_timestamp,
    resolve_partitions,
    run,
)
from .output import Progress, print_json, print_table

HEADERS = ("TOPIC", "PARTITION", "OFFSET", "LOW-WATERMARK", "LEADER-LOG-START-OFFSET", "ERROR")


def add_parser(sub, common: argparse.ArgumentParser, summary: str) -> None:
    p = sub.add_parser(
        "delete-records", parents=[common], help=summary,
        description="Delete the records below an offset in each partition, from Kafka's offset JSON file "
                    "or from --topic/--partition with --before-offset or --before-timestamp. Exit code 0 when "
                    "every partition succeeded, 1 when any failed, 2 on bad input (nothing deleted).")
    p.add_argument("--offset-json-file", metavar="FILE",
                   help='{"partitions":[{"topic":"t","partition":0,"offset":3}],"version":1}; "-" reads stdin')
    p.add_argument("--topic", help="delete from this topic (all its partitions unless --partition)")
    p.add_argument("--partition", type=int, help="only this partition of --topic")
    before = p.add_mutually_exclusive_group()
    before.add_argument("--before-offset", type=int, metavar="N",
                        help="delete the records below offset N (-1: up to the high watermark)")
    before.add_argument("--before-timestamp", metavar="ISO8601|MS",
                        help="delete the records before the first record at or after this time")
    p.add_argument("--leader-only", action="store_true",
                   help="answer once the leaders moved their log start offset, without waiting for followers "
                        "(DeleteRecords v3; fails per partition on brokers without it)")
    p.add_argument("--wait-erased", action="store_true",
                   help="then wait until the deleted records are physically gone from every alive replica "
                        "(erasure.max.delay.ms; Ebb's DescribeErasure) and print how long that took")
    p.add_argument("--wait-erased-timeout-ms", type=int, default=600_000,
                   help="how long --wait-erased waits (default 600000)")
    p.add_argument("--timeout-ms", type=int, default=30000,
                   help="how long the brokers may wait for the low watermarks to move (default 30000)")
    p.set_defaults(func=lambda args: run(args, delete_records_command))


def _read_offsets_file(path: str) -> dict[TopicPartition, int]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--offset-json-file {path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput(f"--offset-json-file {path}: not UTF-8 text") from None
    try:
        return parse_offsets_json(text)
    except OffsetsFileError as exc:
        raise BadInput(f"--offset-json-file {path}: {exc}") from None


def _check_arguments(args: argparse.Namespace) -> tuple[dict[TopicPartition, int] | None, int | None]:
    """What can be checked without the cluster: (offsets from the file, the timestamp in ms)."""
    if args.timeout_ms < 0:
        raise BadInput(f"--timeout-ms {args.timeout_ms} is negative")
    if args.offset_json_file is not None:
        flags = [name for name, value in (("--topic", args.topic), ("--partition", args.partition),
                                          ("--before-offset", args.before_offset),
                                          ("--before-timestamp", args.before_timestamp)) if value is not None]
        if flags:
            raise BadInput(f"--offset-json-file cannot be combined with {', '.join(flags)}")
        return _read_offsets_file(args.offset_json_file), None
    if args.topic is None:
        raise BadInput("say what to delete: --offset-json-file FILE, or --topic with --before-offset "
                       "or --before-timestamp")
    if args.before_offset is None and args.before_timestamp is None:
        raise BadInput("--topic needs --before-offset N or --before-timestamp TIME")
    if args.before_offset is not None and args.before_offset < -1:
        raise BadInput(f"--before-offset {args.before_offset} is negative (only -1, the high watermark, is allowed)")
    if args.partition is not None and args.partition < 0:
        raise BadInput(f"--partition {args.partition} is negative")
    timestamp = None
    if args.before_timestamp is not None:
        timestamp = parse_timestamp(args.before_timestamp, "--before-timestamp")
    return None, timestamp


async def _latest_offsets(admin: Admin, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    results = await admin.list_offsets(dict.fromkeys(partitions, LATEST))
    for tp in partitions:
        result = results[tp]
        if not result.ok:
            raise Failed(f"cannot read the high watermark of {tp}: {error_text(result.error, result.error_message)}"
                         " (nothing was deleted)")
    return {tp: results[tp].offset for tp in partitions}


async def _offsets_before(admin: Admin, partitions: list[TopicPartition], timestamp: int,
                          latest: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Per partition, the offset of the first record at or after `timestamp`, or `latest` if there is none."""
    results = await admin.list_offsets(dict.fromkeys(partitions, timestamp))
    offsets = {}
    for tp in partitions:
        result = results[tp]
        if not result.ok:
            raise Failed(f"cannot find the offset for the time in {tp}: "
                         f"{error_text(result.error, result.error_message)} (nothing was deleted)")
        offsets[tp] = result.offset if result.offset >= 0 else latest[tp]
    return offsets


# A bar that moves in steps of about 5%, and no request under 100 partitions: many partitions on one
# broker go in several requests, one after another.
PROGRESS_STEPS = 20
MIN_PARTITIONS_PER_REQUEST = 100


async def _delete(admin: Admin, offsets: dict[TopicPartition, int], *, leader_only: bool,
                  timeout_ms: int, show_progress: bool) -> dict[TopicPartition, DeletedRecords]:
    """Per leader broker, concurrently, its partitions in requests of at most 1/PROGRESS_STEPS of the
    whole, one after another, so that the progress bar moves as they are answered."""
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in offsets:
        info = admin.cluster.partition_info(tp)
        by_leader[info.leader if info is not None else -1].append(tp)
    per_request = max(MIN_PARTITIONS_PER_REQUEST, -(-len(offsets) // PROGRESS_STEPS))
    results: dict[TopicPartition, DeletedRecords] = {}
    with Progress(len(offsets), "deleting records", enabled=None if show_progress else False) as progress:
        async def one_leader(partitions: list[TopicPartition]) -> None:
            for first in range(0, len(partitions), per_request):
                share = {tp: offsets[tp] for tp in partitions[first:first + per_request]}
                deleted = await admin.delete_records(share, leader_only=leader_only, timeout_ms=timeout_ms)
                results.update(deleted.partition_results())
                progress.advance(len(share))

        await asyncio.gather(*(one_leader(partitions) for partitions in by_leader.values()))
    return results


async def _wait_erased(admin: Admin, offsets: dict[TopicPartition, int], timeout_ms: int) -> float:
    try:
        took, _ = await wait_erased(admin.cluster, offsets, timeout_s=timeout_ms / 1000)
    except TimeoutError as exc:
        raise Failed(f"{exc} (is erasure.max.delay.ms set on the topic? `ebb offsets --erased` shows each "
                     f"replica)") from None
    return took


async def delete_records_command(args: argparse.Namespace) -> int:
    from_file, timestamp = _check_arguments(args)
    async with connect(args) as admin:
        if from_file is not None:
            topics = await existing_topics(admin, {tp.topic for tp in from_file})
            check_partitions(topics, from_file)
            partitions = sorted(from_file)
        else:
            partitions = await resolve_partitions(admin, args.topic, args.partition)
        latest = await _latest_offsets(admin, partitions)
        if from_file is not None:
            offsets = {tp: from_file[tp] for tp in partitions}
        elif args.before_offset is not None:
            offsets = dict.fromkeys(partitions, args.before_offset)
        else:
            offsets = None
        if offsets is not None:
            for tp, offset in offsets.items():
                if offset > latest[tp]:
                    raise BadInput(f"offset {offset} for {tp} is above its high watermark {latest[tp]}")
        else:
            assert timestamp is not None  # neither a file nor --before-offset: _check_arguments saw a time
            offsets = await _offsets_before(admin, partitions, timestamp, latest)
        results = await _delete(admin, offsets, leader_only=args.leader_only, timeout_ms=args.timeout_ms,
                                show_progress=args.output != "json")
        erased = None
        if args.wait_erased and all(r.ok for r in results.values()):
            erased = await _wait_erased(admin, {tp: results[tp].low_watermark for tp in partitions},
                                        args.wait_erased_timeout_ms)

    rows = [(tp, offsets[tp], results[tp]) for tp in partitions]
    if args.output == "json":
        document: dict = {"partitions": [
            {"topic": tp.topic, "partition": tp.partition, "offset": offset, "low_watermark": r.low_watermark,
             "leader_log_start_offset": r.leader_log_start_offset,
             "error": r.error.name if not r.ok else None,
             "error_message": error_text(r.error, r.error_message)}
            for tp, offset, r in rows]}
        if timestamp is not None:
            document["before_timestamp"] = timestamp
        if erased is not None:
            document["erased_after_ms"] = round(erased * 1000, 1)
        print_json(document)
    else:
        print_table(HEADERS, [
            (tp.topic, tp.partition, offset, r.low_watermark if r.ok else None,
             r.leader_log_start_offset if r.ok and r.leader_log_start_offset >= 0 else None,
             error_text(r.error, r.error_message))
            for tp, offset, r in rows])
    if erased is not None and args.output != "json":
        print(f"erased on every alive replica {erased * 1000:.1f} ms after the deletion was answered")
    failed = [tp for tp, _, r in rows if not r.ok]
    if failed:
        print(f"ebb delete-records: {len(failed)} of {len(rows)} partition(s) failed: "
              f"{', '.join(map(str, failed[:10]))}{' ...' if len(failed) > 10 else ''}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
