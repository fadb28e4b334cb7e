"""The open-file budget: how many idle segment files may stay open under `ulimit -n`.

At start-up the soft limit is raised to the hard one (what the JVM does for Kafka), and the number
of idle segment files kept open (`ebb.log.open.segments.max`) is lowered to what the limit leaves
after a reserve for sockets and checkpoints; a limit too low for even a small budget stops the
broker with a message that says what to raise. The budget itself is `segment_file.OPEN_SEGMENTS`.
"""

from __future__ import annotations

import resource

import structlog

logger = structlog.get_logger(__name__)

# Sockets, the metadata store, checkpoints, executor threads' files: what the broker needs besides segments.
RESERVE = 1024
MIN_OPEN_SEGMENTS = 64


class OpenFilesExhausted(Exception):
    """`ulimit -n` leaves no room for the open-segment budget."""


def raise_soft_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def segment_budget(wanted: int) -> int:
    """How many idle segment files to keep open: `wanted`, or less if `ulimit -n` (raised to the
    hard limit first) has no room for it beside the reserve. OpenFilesExhausted if not even
    MIN_OPEN_SEGMENTS fit."""
    soft = raise_soft_limit()
    room = soft - RESERVE
    if room < MIN_OPEN_SEGMENTS:
        raise OpenFilesExhausted(
            f"the open-file limit is {soft} (ulimit -n; hard limit {resource.getrlimit(resource.RLIMIT_NOFILE)[1]}), "
            f"but the broker keeps {RESERVE} for connections and checkpoints and needs at least "
            f"{MIN_OPEN_SEGMENTS} for segment files; raise it to at least {RESERVE + MIN_OPEN_SEGMENTS}")
    if wanted > room:
        logger.warning("fewer segment files kept open than configured: ulimit -n is too low",
                       configured=wanted, kept=room, open_file_limit=soft)
        return room
    return wanted
