"""`ebb elect-leaders`: leader elections as kafka-leader-election asks for them (KIP-460).

    ebb elect-leaders --election-type preferred --all-topic-partitions
    ebb elect-leaders --election-type preferred --topic T --partition 0
    ebb elect-leaders --election-type unclean --path-to-json-file partitions.json

The file is kafka-leader-election's: {"partitions": [{"topic": "t", "partition": 0}, ...]}. An
unclean election makes an out-of-sync replica leader: records only the lost replicas had are gone.
"""

from __future__ import annotations

import argparse
import json

from protocol.enums import ElectionType
from protocol.errors import ErrorCode

from ..reassignments import elect_leaders
from .common import EXIT_FAILED, EXIT_OK, BadInput, connect, error_text, read_partition_entries, run
from .output import print_json, print_table


def add_parser(sub, common: argparse.ArgumentParser, summary: str) -> None:
    p = sub.add_parser("elect-leaders", parents=[common], help=summary,
                       description="Elect the preferred leader, or an unclean one where no in-sync replica "
                                   "is alive, for some partitions or all of them.")
    p.add_argument("--election-type", required=True, type=str.lower, choices=("preferred", "unclean"))
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    which.add_argument("--topic", help="this topic's --partition")
    which.add_argument("--path-to-json-file", metavar="FILE", help="kafka-leader-election's JSON file")
    p.add_argument("--partition", type=int, help="the partition of --topic")
    p.set_defaults(func=lambda args: run(args, elect_command))


def read_partitions(path: str) -> list[tuple[str, int]]:
    entries = read_partition_entries(path, "--path-to-json-file")
    found = []
    for entry in entries:
        topic, partition = (entry.get(k) for k in ("topic", "partition"))
        if not isinstance(topic, str) or type(partition) is not int:
            raise BadInput(f"--path-to-json-file {path}: each partition needs \"topic\" and \"partition\": "
                           f"{json.dumps(entry)}")
        found.append((topic, partition))
    return found


async def elect_command(args: argparse.Namespace) -> int:
    if args.topic is not None and args.partition is None:
        raise BadInput("--topic needs --partition")
    if args.partition is not None and args.topic is None:
        raise BadInput("--partition goes with --topic")
    partitions = (None if args.all_topic_partitions else
                  [(args.topic, args.partition)] if args.topic is not None else read_partitions(args.path_to_json_file))
    election = ElectionType.PREFERRED if args.election_type == "preferred" else ElectionType.UNCLEAN
    async with connect(args) as admin:
        outcomes = await elect_leaders(admin, election, partitions)
    rows = [(t, p, _result(o.error), error_text(o.error, o.message) if o.error not in _FINE else None)
            for (t, p), o in sorted(outcomes.items())]
    if args.output == "json":
        print_json({"election": args.election_type, "partitions": [
            {"topic": t, "partition": p, "result": r, "error": e} for t, p, r, e in rows]})
    else:
        print_table(("TOPIC", "PARTITION", "RESULT", "ERROR"), rows)
    return EXIT_FAILED if any(e for *_, e in rows) else EXIT_OK


_FINE = (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)


def _result(error: ErrorCode) -> str:
    return {ErrorCode.NONE: "elected", ErrorCode.ELECTION_NOT_NEEDED: "not needed"}.get(error, "failed")
