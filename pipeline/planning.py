"""Driver side: which partitions to read and between which offsets.

Batch planning (one short Admin connection) and the stream's offset bookkeeping (on the stream
reader's kept Admin) both run here. The offset ranges they produce are what the executors read.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import structlog
from pyspark.sql.datasource import InputPartition

from client import Admin, ErrorCode, TopicPartition

from .config import ReadConfig, cluster_options
from .options import EARLIEST, EbbSourceError, OffsetSpec

log = structlog.get_logger("ebb.pipeline")

Offsets = dict[TopicPartition, int]


@dataclass
class OffsetRange(InputPartition):
    """Records [start, end) of one partition; start EARLIEST means "from the log start, whatever it is"."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start if self.start >= 0 else 0


def quiet_client_logs() -> None:
    """The client logs connections at debug level; in Spark's workers only warnings are worth printing.
    Called only from code that runs in those workers; a process that configured structlog keeps it."""
    if not structlog.is_configured():
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def connect(config: ReadConfig) -> Admin:
    return Admin(config.bootstrap, **cluster_options(config))


async def topic_partitions(admin: Admin, config: ReadConfig, *, allow_missing: bool = False) -> list[TopicPartition]:
    """The partitions the options select, sorted. Unknown topics or partitions raise EbbSourceError."""
    selection = config.selection
    if selection.pattern is not None:
        names = [t for t in await admin.list_topics() if re.fullmatch(selection.pattern, t)]
    elif selection.assigned:
        names = sorted({t for t, _ in selection.assigned})
    else:
        names = sorted(selection.topics)
    described = await admin.describe_topics(names) if names else {}
    missing = [n for n, info in described.items() if info.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    if missing and not allow_missing:
        raise EbbSourceError(f"topic {', '.join(map(repr, missing))} does not exist on {config.bootstrap}")
    for name, info in described.items():
        if info.error not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            raise EbbSourceError(f"cannot describe topic {name!r}: {info.error.name}")
    found = sorted(TopicPartition(n, p) for n, info in described.items() for p in info.partitions)
    if not selection.assigned:
        return found
    assigned = {TopicPartition(*tp) for tp in selection.assigned}
    unknown = sorted(assigned - set(found))
    if unknown and not allow_missing:
        raise EbbSourceError(f"option 'assign' names partitions that do not exist: "
                             f"{', '.join(f'{t}-{p}' for t, p in unknown)}")
    return sorted(assigned & set(found))


async def resolve_offsets(admin: Admin, config: ReadConfig, partitions: list[TopicPartition],
                          spec: OffsetSpec) -> Offsets:
    """Each partition's offset under a spec: sentinels and timestamps looked up with ListOffsets, at the
    reader's isolation level (latest is the last stable offset under read_committed)."""
    isolation = config.isolation_level
    if spec.kind == "earliest":
        return await admin.earliest_offsets(partitions)
    if spec.kind == "latest":
        return await admin.latest_offsets(partitions, isolation_level=isolation)
    if spec.kind == "timestamp":
        given = dict.fromkeys(partitions, spec.timestamp)
    else:
        given = {TopicPartition(t, p): o for t, parts in spec.offsets.items() for p, o in parts.items()}
        if set(given) != set(partitions):
            def names(tps):
                return ", ".join(map(str, sorted(tps))) or "none"
            what = "a timestamp" if spec.kind == "by_timestamp" else "an offset"
            sentinels = "" if spec.kind == "by_timestamp" else " (-2 earliest, -1 latest)"
            raise EbbSourceError(
                f"option '{spec.option}' must give {what} for every partition read{sentinels}. "
                f"Missing: {names(set(partitions) - set(given))}; not read: {names(set(given) - set(partitions))}")
    by_time = spec.kind in ("timestamp", "by_timestamp")
    lookups = given if by_time else {tp: o for tp, o in given.items() if o < 0}
    if lookups:
        no_match = []
        for tp, result in (await admin.list_offsets(lookups, isolation_level=isolation)).items():
            if not result.ok:
                raise EbbSourceError(f"cannot look up the offsets of {tp}: {result.error.name}")
            if by_time and result.offset < 0:  # no record at or after that time
                no_match.append(tp)
            given[tp] = result.offset
        if no_match and not spec.no_match_is_latest:
            raise EbbSourceError(
                f"option '{spec.option}': no record of {', '.join(map(str, sorted(no_match)))} has a timestamp at "
                "or after the one given. Set startingOffsetsByTimestampStrategy=latest to start those at the latest "
                "offset instead")
        if no_match:
            given.update(await admin.latest_offsets(no_match, isolation_level=isolation))
    return given


async def plan_batch(config: ReadConfig) -> list[OffsetRange]:
    async with connect(config) as admin:
        partitions = await topic_partitions(admin, config)
        starts = await resolve_offsets(admin, config, partitions, config.starting)
        ends = await resolve_offsets(admin, config, partitions, config.ending)
    ranges = []
    for tp in partitions:
        if starts[tp] > ends[tp]:
            raise EbbSourceError(f"{tp}: {config.starting.option} {starts[tp]} is after "
                                 f"{config.ending.option} {ends[tp]}")
        if starts[tp] < ends[tp]:
            ranges.append(OffsetRange(tp.topic, tp.partition, starts[tp], ends[tp]))
    return split_ranges(ranges, config.min_partitions)


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Cut ranges in proportion to their size into about `min_partitions` tasks (the connector's minPartitions)."""
    total = sum(r.size for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions or total == 0:
        return ranges
    out = []
    for r in ranges:
        pieces = max(1, min(r.size, round(r.size / total * min_partitions))) if r.size else 1
        step = math.ceil(r.size / pieces) if r.size else 0
        cuts = [r.start + i * step for i in range(pieces)] + [r.end]
        out += [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(cuts, cuts[1:], strict=False) if a < b]
    return out


def stream_ranges(start: Offsets, end: Offsets, min_partitions: int | None) -> list[OffsetRange]:
    """A micro-batch's ranges. A partition absent from `start` appeared after the stream began: read it
    from its log start, as the Kafka connector does."""
    ranges = []
    for tp, until in sorted(end.items()):
        begin = start.get(tp, EARLIEST)
        if begin == EARLIEST or begin < until:
            ranges.append(OffsetRange(tp.topic, tp.partition, begin, until))
    return split_ranges(ranges, min_partitions)


def data_loss(config: ReadConfig, message: str) -> None:
    """Raise, or log and go on, as failOnDataLoss says."""
    if config.fail_on_data_loss:
        raise EbbSourceError(f"{message}. Some data may have been lost. Set the option failOnDataLoss=false "
                             "to go on without it.")
    log.warning("data_loss", detail=message)


async def stream_start(admin: Admin, config: ReadConfig) -> Offsets:
    partitions = await topic_partitions(admin, config)
    return await resolve_offsets(admin, config, partitions, config.starting)


async def latest_now(admin: Admin, config: ReadConfig) -> Offsets:
    partitions = await topic_partitions(admin, config, allow_missing=True)
    return await admin.latest_offsets(partitions, isolation_level=config.isolation_level) if partitions else {}


async def latest_for_stream(admin: Admin, config: ReadConfig, start: Offsets, cap: Offsets | None,
                            max_rows: int | None) -> Offsets:
    """The end of the next micro-batch: the latest offsets, capped by AvailableNow and the read limit."""
    latest = await latest_now(admin, config)
    new = [tp for tp in latest if tp not in start]
    earliest = await admin.earliest_offsets(new) if new else {}
    gone = sorted(set(start) - set(latest))
    if gone:
        data_loss(config, f"partitions {', '.join(map(str, gone))} are gone (topic deleted?)")
    end: Offsets = {}
    for tp, offset in latest.items():
        begin = start.get(tp, earliest.get(tp, 0))
        if offset < begin:
            data_loss(config, f"{tp}: the latest offset went back from {begin} to {offset}")
        if cap is not None:
            offset = min(offset, cap.get(tp, begin))
        end[tp] = offset
    if max_rows is not None:
        end = rate_limit({tp: start.get(tp, earliest.get(tp, 0)) for tp in end}, end, max_rows)
    return end


def rate_limit(begin: Mapping[TopicPartition, int], end: Offsets, limit: int) -> Offsets:
    """At most about `limit` offsets in all, shared in proportion to each partition's backlog.

    The Kafka connector's rule: a share below one is rounded up so that no partition starves, other
    shares are rounded down.
    """
    sizes = {tp: end[tp] - begin[tp] for tp in end if end[tp] > begin[tp]}
    total = sum(sizes.values())
    if total <= limit:
        return end
    out = dict(end)
    for tp, size in sizes.items():
        share = limit * size / total
        out[tp] = min(end[tp], begin[tp] + (math.ceil(share) if share < 1 else math.floor(share)))
    return out
