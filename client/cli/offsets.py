"""`ebb offsets`: per partition the earliest and latest offsets, or the offset for a time (ListOffsets).

    ebb offsets --topic T                      # EARLIEST (log start) and LATEST (high watermark)
    ebb offsets --topic T --time 2024-05-01T00:00:00Z   # first record at or after the time
    ebb offsets --topic T --time max-timestamp # the record with the highest timestamp
    ebb offsets --topic T --erased             # per replica, the offset below which its bytes are gone
"""

from __future__ import annotations

import argparse

from ..admin import EARLIEST, LATEST, MAX_TIMESTAMP, ListOffsetsResult
from ..erasure import PartitionErasure, describe_erasure
from .common import EXIT_FAILED, EXIT_OK, BadInput, connect, error_text, parse_timestamp, resolve_partitions, run
from .output import print_json, print_table

_SPECIAL = {"earliest": EARLIEST, "latest": LATEST, "max-timestamp": MAX_TIMESTAMP}


def add_parser(sub, common: argparse.ArgumentParser, summary: str) -> None:
    p = sub.add_parser("offsets", parents=[common], help=summary,
                       description="Offsets per partition: the earliest (log start) and latest (high watermark), "
                                   "or with --time the first record at or after a time.")
    p.add_argument("--topic", help="this topic (default: every non-internal topic)")
    p.add_argument("--partition", type=int, help="only this partition of --topic")
    p.add_argument("--time", metavar="earliest|latest|max-timestamp|ISO8601|MS",
                   help="which offset: a special one, or the first record at or after a time "
                        "(-1 when no record is that recent)")
    p.add_argument("--erased", action="store_true",
                   help="what each replica has physically erased (Ebb's DescribeErasure): the log start offset and "
                        "the offset below which no byte of a record is left in the replica's files")
    p.set_defaults(func=lambda args: run(args, offsets_command))


def _spec(text: str) -> int:
    special = _SPECIAL.get(text.strip().lower())
    return special if special is not None else parse_timestamp(text, "--time")


async def offsets_command(args: argparse.Namespace) -> int:
    if args.erased:
        if args.time is not None:
            raise BadInput("--erased and --time are exclusive")
        return await _erased_command(args)
    spec = _spec(args.time) if args.time is not None else None
    async with connect(args) as admin:
        partitions = await resolve_partitions(admin, args.topic, args.partition)
        if spec is None:
            earliest = await admin.list_offsets(dict.fromkeys(partitions, EARLIEST))
            latest = await admin.list_offsets(dict.fromkeys(partitions, LATEST))
            ranges = [(tp, earliest[tp], latest[tp]) for tp in partitions]
        else:
            found = await admin.list_offsets(dict.fromkeys(partitions, spec))
            rows = [(tp, found[tp]) for tp in partitions]
    failed = False
    if spec is None:
        errors = [[_error(r) for r in (e, lt)] for _, e, lt in ranges]
        failed = any(any(pair) for pair in errors)
        if args.output == "json":
            print_json({"partitions": [
                {"topic": tp.topic, "partition": tp.partition, "earliest": _offset(e), "latest": _offset(lt),
                 "error": err[0] or err[1]} for (tp, e, lt), err in zip(ranges, errors, strict=True)]})
        else:
            print_table(("TOPIC", "PARTITION", "EARLIEST", "LATEST", "ERROR"), [
                (tp.topic, tp.partition, _offset(e), _offset(lt), err[0] or err[1])
                for (tp, e, lt), err in zip(ranges, errors, strict=True)])
    else:
        failed = any(not r.ok for _, r in rows)
        if args.output == "json":
            print_json({"time": args.time, "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "offset": _offset(r),
                 "timestamp": r.timestamp if r.ok else None, "error": _error(r)} for tp, r in rows]})
        else:
            print_table(("TOPIC", "PARTITION", "OFFSET", "TIMESTAMP", "ERROR"), [
                (tp.topic, tp.partition, _offset(r), r.timestamp if r.ok and r.timestamp >= 0 else None, _error(r))
                for tp, r in rows])
    return EXIT_FAILED if failed else EXIT_OK


def _offset(result: ListOffsetsResult) -> int | None:
    return result.offset if result.ok else None


def _error(result: ListOffsetsResult) -> str | None:
    return error_text(result.error, result.error_message)



async def _erased_command(args: argparse.Namespace) -> int:
    async with connect(args) as admin:
        partitions = await resolve_partitions(admin, args.topic, args.partition)
        found = await describe_erasure(admin.cluster, partitions)
    rows = [(tp, found[tp]) for tp in partitions]
    if args.output == "json":
        print_json({"partitions": [
            {"topic": tp.topic, "partition": tp.partition, "erased": e.erased_offset, "replicas": [
                {"broker": r.broker_id, "log_start_offset": r.log_start_offset if r.ok else None,
                 "erased_offset": r.erased_offset if r.ok else None,
                 "erasable_offset": r.erasable_offset if r.ok else None,
                 "erasure_max_delay_ms": r.max_delay_ms if r.ok else None,
                 "error": error_text(r.error, r.error_message)} for r in e.replicas]} for tp, e in rows]})
    else:
        print_table(("TOPIC", "PARTITION", "ERASED", "REPLICAS (broker:start/erased)", "MAX-DELAY-MS", "ERROR"), [
            (tp.topic, tp.partition, e.erased_offset, _replicas(e), _delay(e), _errors(e)) for tp, e in rows])
    return EXIT_FAILED if any(not r.ok for _, e in rows for r in e.alive) else EXIT_OK


def _replicas(found: PartitionErasure) -> str:
    return " ".join(f"{r.broker_id}:{r.log_start_offset}/{r.erased_offset}" if r.ok else f"{r.broker_id}:-"
                    for r in found.replicas)


def _delay(found: PartitionErasure) -> int | None:
    return next((r.max_delay_ms for r in found.replicas if r.ok), None)


def _errors(found: PartitionErasure) -> str | None:
    failed = [f"{r.broker_id}: {error_text(r.error, r.error_message)}" for r in found.replicas if not r.ok]
    return "; ".join(failed) or None
