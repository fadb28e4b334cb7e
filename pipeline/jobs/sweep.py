"""Delete the records older than a time from every topic matching a pattern (a bulk retention sweep).

    python -m pipeline.jobs.sweep --bootstrap 127.0.0.1:9092 --topics 'events-.*' --before 2026-11-01T00:00:00Z
    python -m pipeline.jobs.sweep ... --execute [--leader-only]

For each partition it asks ListOffsets for the first offset whose timestamp is at or after --before
(none: every record is older, so up to the high watermark) and deletes below it with DeleteRecords.
As with retention by time, a record is judged by where it sits, not by its own timestamp: one with an
older timestamp produced after a newer one stays. Without --execute nothing is deleted: the table shows
what would be. --leader-only asks for DeleteRecords v3's leader-only mode (KIP-1343): the answer comes
once the leader's log start moved, without waiting for the followers.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from client import Admin, KafkaClientError, TopicPartition


@dataclass
class TopicSweep:
    topic: str
    partitions: int
    log_start: int  # summed over the partitions
    cut: int  # summed: where the log starts after the sweep
    error: str | None = None

    @property
    def records(self) -> int:
        return self.cut - self.log_start


def parse_time(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 time (UTC when it names no zone)."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither milliseconds since the epoch nor an ISO 8601 time") \
            from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def progress(done: int, total: int, topic: str) -> None:
    width = 30
    filled = width * done // max(total, 1)
    line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {topic}"
    if sys.stderr.isatty():
        print(f"\r{line:<80}", end="" if done < total else "\n", file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)


async def sweep_topic(admin: Admin, topic: str, partitions: list[int], before_ms: int, *, execute: bool,
                      leader_only: bool) -> TopicSweep:
    tps = [TopicPartition(topic, p) for p in partitions]
    starts = await admin.earliest_offsets(tps)
    ends = await admin.latest_offsets(tps)
    found = await admin.list_offsets(dict.fromkeys(tps, before_ms))
    cuts = {}
    for tp in tps:
        result = found[tp]
        if not result.ok:
            return TopicSweep(topic, len(tps), sum(starts.values()), sum(starts.values()), result.error.name)
        cut = ends[tp] if result.offset < 0 else result.offset  # none that recent: everything is older
        cuts[tp] = max(cut, starts[tp])
    sweep = TopicSweep(topic, len(tps), sum(starts.values()), sum(cuts.values()))
    wanted = {tp: cut for tp, cut in cuts.items() if cut > starts[tp]}
    if execute and wanted:
        results = (await admin.delete_records(wanted, leader_only=leader_only)).partition_results()
        failed = {tp: r for tp, r in results.items() if not r.ok}
        if failed:
            sweep.error = "; ".join(f"{tp}: {r.error.name}" for tp, r in sorted(failed.items()))
            sweep.cut = sum(starts[tp] if tp in failed else cuts[tp] for tp in tps)
    return sweep


async def sweep(bootstrap: str, pattern: str, before_ms: int, *, execute: bool, leader_only: bool,
                show_progress: bool = True) -> list[TopicSweep]:
    async with Admin(bootstrap) as admin:
        topics = sorted(t for t in await admin.list_topics() if re.fullmatch(pattern, t))
        described = await admin.describe_topics(topics) if topics else {}
        out = []
        for done, topic in enumerate(topics, 1):
            partitions = sorted(described[topic].partitions)
            try:
                out.append(await sweep_topic(admin, topic, partitions, before_ms, execute=execute,
                                             leader_only=leader_only))
            except KafkaClientError as exc:
                out.append(TopicSweep(topic, len(partitions), 0, 0, str(exc)))
            if show_progress:
                progress(done, len(topics), topic)
        return out


def table(sweeps: list[TopicSweep], execute: bool) -> str:
    head = ("topic", "partitions", "log start", "new log start", "deleted" if execute else "would delete", "error")
    rows = [(s.topic, str(s.partitions), str(s.log_start), str(s.cut), str(s.records), s.error or "")
            for s in sweeps]
    rows.append(("total", str(sum(s.partitions for s in sweeps)), "", "", str(sum(s.records for s in sweeps)),
                 f"{sum(1 for s in sweeps if s.error)} failed" if any(s.error for s in sweeps) else ""))
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in (head, *rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.jobs.sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="Ebb bootstrap servers, host:port[,host:port]")
    parser.add_argument("--topics", required=True, help="regular expression matched against whole topic names")
    parser.add_argument("--before", required=True, type=parse_time,
                        help="delete records older than this: ms since the epoch or ISO 8601 (UTC by default)")
    parser.add_argument("--execute", action="store_true", help="delete (without it: a dry run that only reports)")
    parser.add_argument("--leader-only", action="store_true",
                        help="DeleteRecords v3 leader-only: do not wait for the followers (KIP-1343)")
    args = parser.parse_args(argv)
    # stdout is for the table: the client's logs go to stderr, warnings and worse only
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                        logger_factory=lambda *args: structlog.PrintLogger(sys.stderr))  # stderr as it is now
    try:
        re.compile(args.topics)
    except re.error as exc:
        parser.error(f"--topics is not a valid regular expression: {exc}")
    sweeps = asyncio.run(sweep(args.bootstrap, args.topics, args.before, execute=args.execute,
                               leader_only=args.leader_only))
    if not sweeps:
        print(f"no topic matches {args.topics!r}")
        return 0
    print(table(sweeps, args.execute))
    if not args.execute:
        print("dry run: nothing was deleted; add --execute to delete")
    return 1 if any(s.error for s in sweeps) else 0


if __name__ == "__main__":
    sys.exit(main())
