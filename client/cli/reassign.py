"""`ebb reassign`: move partitions between brokers with kafka-reassign-partitions' JSON file (KIP-455).

    ebb reassign --reassignment-json-file plan.json --execute   # start the moves
    ebb reassign --reassignment-json-file plan.json --verify    # done, still moving, or elsewhere
    ebb reassign --reassignment-json-file plan.json --cancel    # put back the original replicas
    ebb reassign --list                                          # every move under way

The file is the one kafka-reassign-partitions reads: {"version": 1, "partitions": [{"topic": "t",
"partition": 0, "replicas": [2, 3]}, ...]} ("log_dirs", if given, must be "any": Ebb has one log dir
per broker).
"""

from __future__ import annotations

import argparse
import json

from ..reassignments import alter_reassignments, list_reassignments
from .common import EXIT_FAILED, EXIT_OK, BadInput, connect, error_text, existing_topics, read_partition_entries, run
from .output import print_json, print_table


def add_parser(sub, common: argparse.ArgumentParser, summary: str) -> None:
    p = sub.add_parser("reassign", parents=[common], help=summary,
                       description="Move partitions to other brokers, check on the moves, or cancel them, with "
                                   "kafka-reassign-partitions' JSON file.")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="the partitions and their target replicas")
    action = p.add_mutually_exclusive_group(required=True)
    for flag, what in (("--execute", "start the moves"), ("--verify", "report which moves are done"),
                       ("--cancel", "cancel the moves under way"), ("--list", "list every move under way")):
        action.add_argument(flag, action="store_true", help=what)
    p.set_defaults(func=lambda args: run(args, reassign_command))


def read_plan(path: str) -> dict[tuple[str, int], list[int]]:
    """The target replicas per partition from kafka-reassign-partitions' JSON file; bad input raises."""
    entries = read_partition_entries(path, "--reassignment-json-file")
    plan: dict[tuple[str, int], list[int]] = {}
    for entry in entries:
        topic, partition, replicas = (entry.get(k) for k in ("topic", "partition", "replicas"))
        if not isinstance(topic, str) or type(partition) is not int or not isinstance(replicas, list) \
                or not all(type(r) is int for r in replicas):
            raise BadInput(f"--reassignment-json-file {path}: each partition needs \"topic\" (a string), "
                           f"\"partition\" and \"replicas\" (integers): {json.dumps(entry)}")
        if any(d != "any" for d in entry.get("log_dirs") or []):
            raise BadInput(f"--reassignment-json-file {path}: log_dirs other than \"any\" are not supported "
                           "(Ebb has one log dir per broker)")
        if (topic, partition) in plan:
            raise BadInput(f"--reassignment-json-file {path}: {topic}-{partition} is listed twice")
        plan[topic, partition] = replicas
    return plan


async def reassign_command(args: argparse.Namespace) -> int:
    if args.list:
        async with connect(args) as admin:
            moving = await list_reassignments(admin, None)
        rows = [(t, p, m.replicas, m.adding, m.removing) for (t, p), m in sorted(moving.items())]
        if args.output == "json":
            print_json({"reassignments": [{"topic": t, "partition": p, "replicas": r, "adding": a, "removing": rm}
                                          for t, p, r, a, rm in rows]})
        else:
            print_table(("TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"),
                        [(t, p, _ids(r), _ids(a), _ids(rm)) for t, p, r, a, rm in rows])
        return EXIT_OK
    if args.reassignment_json_file is None:
        raise BadInput("--reassignment-json-file is required with --execute, --verify and --cancel")
    plan = read_plan(args.reassignment_json_file)
    async with connect(args) as admin:
        if args.verify:
            moving = await list_reassignments(admin, list(plan))
            topics = await existing_topics(admin, {t for t, _ in plan})
            results = {tp: _verdict(tp, target, moving, topics) for tp, target in plan.items()}
        else:
            outcomes = await alter_reassignments(admin, {tp: (None if args.cancel else r) for tp, r in plan.items()})
            done = "cancelled" if args.cancel else "started"
            results = {tp: (done, None) if o.error == 0 else ("failed", error_text(o.error, o.message))
                       for tp, o in outcomes.items()}
    verdicts = [(t, p, state, error) for (t, p), (state, error) in sorted(results.items())]
    if args.output == "json":
        print_json({"partitions": [{"topic": t, "partition": p, "replicas": plan[t, p], "state": state,
                                    "error": error} for t, p, state, error in verdicts]})
    else:
        print_table(("TOPIC", "PARTITION", "TARGET", "STATE", "ERROR"),
                    [(t, p, _ids(plan[t, p]), state, error) for t, p, state, error in verdicts])
    wanted = "completed" if args.verify else None
    failed = any(error or (wanted and state != wanted) for _, _, state, error in verdicts)
    return EXIT_FAILED if failed else EXIT_OK


def _verdict(tp: tuple[str, int], target: list[int], moving: dict, topics: dict) -> tuple[str, str | None]:
    if tp in moving:
        return "in progress", None
    info = topics[tp[0]].partitions.get(tp[1])
    if info is None:
        return "failed", "UNKNOWN_TOPIC_OR_PARTITION"
    if list(info.replicas) == target:
        return "completed", None
    return "not moving", f"the replicas are {_ids(info.replicas)}, not the target"


def _ids(ids) -> str:
    return ",".join(map(str, ids))
