"""`ebb topics create|list|describe|delete`.

Topics named for describe and delete must exist and a topic to create must not (unless --if-exists /
--if-not-exists): that is checked against metadata first, exit code 2, nothing changed. What the
controller then refuses (an invalid config, a replication factor above the broker count) is exit 1.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import KafkaError
from .common import EXIT_FAILED, EXIT_OK, BadInput, connect, error_text, existing_topics, parse_key_values, run
from .output import PROGRESS_MIN_ITEMS, Elapsed, print_json, print_table


def add_parser(sub, common: argparse.ArgumentParser, summary: str) -> None:
    topics = sub.add_parser("topics", help=summary,
                            description="Create, list, describe and delete topics.")
    actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = actions.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=1, help="number of partitions (default 1)")
    create.add_argument("--replication-factor", type=int, default=1, help="replicas per partition (default 1)")
    create.add_argument("--config", action="append", default=[], metavar="K=V[,K=V]",
                        help="topic config, e.g. retention.ms=3600000 (repeatable)")
    create.add_argument("--if-not-exists", action="store_true", help="succeed if the topic already exists")
    create.add_argument("--timeout-ms", type=int, default=30000)
    create.set_defaults(func=lambda args: run(args, create_command))

    listing = actions.add_parser("list", parents=[common], help="list topic names")
    listing.add_argument("--include-internal", action="store_true", help="also list internal topics")
    listing.set_defaults(func=lambda args: run(args, list_command))

    describe = actions.add_parser("describe", parents=[common], help="partitions, leaders, replicas and ISR")
    describe.add_argument("--topic", action="append", metavar="TOPIC", help="topic to describe (repeatable; "
                                                                            "default: every non-internal topic)")
    describe.set_defaults(func=lambda args: run(args, describe_command))

    delete = actions.add_parser("delete", parents=[common], help="delete topics")
    delete.add_argument("--topic", action="append", required=True, metavar="TOPIC", help="topic (repeatable)")
    delete.add_argument("--if-exists", action="store_true", help="skip topics that do not exist")
    delete.add_argument("--timeout-ms", type=int, default=30000)
    delete.set_defaults(func=lambda args: run(args, delete_command))


async def create_command(args: argparse.Namespace) -> int:
    if args.partitions < 1:
        raise BadInput(f"--partitions {args.partitions}: a topic needs at least one partition")
    if args.replication_factor < 1:
        raise BadInput(f"--replication-factor {args.replication_factor}: must be at least 1")
    configs: dict[str, str] = {}
    for item in args.config:
        for key, value in parse_key_values(item, "--config").items():
            if key in configs:
                raise BadInput(f"--config: {key} is given twice")
            configs[key] = value
    async with connect(args) as admin:
        existing = (await admin.describe_topics([args.topic]))[args.topic]
        if not existing.error:
            if args.if_not_exists:
                _report(args, args.topic, "exists", None)
                return EXIT_OK
            raise BadInput(f"topic {args.topic!r} already exists")
        try:
            await admin.create_topic(args.topic, args.partitions, args.replication_factor, configs,
                                     timeout_ms=args.timeout_ms)
        except KafkaError as exc:
            _report(args, args.topic, "failed", exc.message)
            return EXIT_FAILED
    _report(args, args.topic, "created", None)
    return EXIT_OK


def _report(args: argparse.Namespace, topic: str, status: str, error: str | None) -> None:
    if args.output == "json":
        print_json({"topics": [{"topic": topic, "status": status, "error": error}]})
    elif error:
        print(f"ebb topics {args.action}: topic {topic!r}: {error}", file=sys.stderr)
    else:
        print(f"{status} topic {topic!r}")


async def list_command(args: argparse.Namespace) -> int:
    async with connect(args) as admin:
        names = await admin.list_topics(include_internal=args.include_internal)
    if args.output == "json":
        print_json({"topics": names})
    else:
        for name in names:
            print(name)
    return EXIT_OK


async def describe_command(args: argparse.Namespace) -> int:
    async with connect(args) as admin:
        names = args.topic if args.topic else await admin.list_topics()
        topics = await existing_topics(admin, names) if names else {}
    if args.output == "json":
        print_json({"topics": [
            {"topic": name, "topic_id": str(info.topic_id) if info.topic_id else None, "internal": info.is_internal,
             "partitions": [{"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                             "replicas": p.replicas, "isr": p.isr, "offline_replicas": p.offline_replicas,
                             "error": p.error.name if p.error else None}
                            for _, p in sorted(info.partitions.items())]}
            for name, info in sorted(topics.items())]})
        return EXIT_OK
    print_table(("TOPIC", "TOPIC-ID", "PARTITION", "LEADER", "LEADER-EPOCH", "REPLICAS", "ISR", "OFFLINE", "ERROR"), [
        (name, info.topic_id, p.partition, p.leader, p.leader_epoch, p.replicas, p.isr, p.offline_replicas,
         p.error.name if p.error else None)
        for name, info in sorted(topics.items()) for _, p in sorted(info.partitions.items())])
    return EXIT_OK


async def delete_command(args: argparse.Namespace) -> int:
    wanted = list(dict.fromkeys(args.topic))
    async with connect(args) as admin:
        if args.if_exists:
            described = await admin.describe_topics(wanted)
            skipped = [name for name in wanted if described[name].error]
            wanted = [name for name in wanted if name not in skipped]
        else:
            skipped = []
            described = await existing_topics(admin, wanted)
        partitions = sum(len(described[name].partitions) for name in wanted)
        # One request answered when every partition is gone: on a terminal, the time it has taken so far.
        waiting = Elapsed(f"deleting {len(wanted)} topic(s) of {partitions} partitions",
                          enabled=args.output != "json" and partitions >= PROGRESS_MIN_ITEMS)
        results = await waiting.run(admin.delete_topics(wanted, timeout_ms=args.timeout_ms)) if wanted else {}
    rows = [(name, "deleted" if results[name].ok else "failed",
             error_text(results[name].error, results[name].error_message)) for name in wanted]
    rows += [(name, "absent", None) for name in skipped]
    if args.output == "json":
        print_json({"topics": [{"topic": t, "status": s, "error": e} for t, s, e in rows]})
    else:
        print_table(("TOPIC", "STATUS", "ERROR"), rows)
    return EXIT_FAILED if any(status == "failed" for _, status, _ in rows) else EXIT_OK
