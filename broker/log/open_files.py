"""The open-file budget: every segment keeps its `.log` file open, so partitions cost descriptors.

At start-up the soft limit is raised to the hard one (what the JVM does for Kafka), and a log dir
holding more segments than the limit allows stops the broker with a message that says what to
raise. Before partitions are created, the descriptors they will need are checked against what is
left, so a CreateTopics or CreatePartitions too big for `ulimit -n` is refused with a clear error
instead of failing half-way with EMFILE.
"""

from __future__ import annotations

import os
import resource

# Sockets, the metadata store, checkpoints, executor threads' files: what the broker needs besides segments.
RESERVE = 1024


class OpenFilesExhausted(Exception):
    """More descriptors are needed than `ulimit -n` allows."""


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


def limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def in_use() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # no /proc: assume the worst case is still far
        return 0


def check_room(needed: int, what: str) -> None:
    """OpenFilesExhausted unless `needed` more descriptors fit under the limit with the reserve kept."""
    available = limit() - in_use() - RESERVE
    if needed > available:
        raise OpenFilesExhausted(
            f"{what} needs {needed} more open files, but only {max(available, 0)} are left under the limit of "
            f"{limit()} (ulimit -n; {RESERVE} kept for connections and checkpoints); raise the limit")


def check_startup(segments: int) -> None:
    """Start-up: the segments found on disk must fit under the limit (raised to the hard limit first)."""
    soft = raise_soft_limit()
    if segments + RESERVE > soft:
        raise OpenFilesExhausted(
            f"the log dirs hold {segments} segments, each kept open, but the open-file limit is {soft} "
            f"(ulimit -n; hard limit {resource.getrlimit(resource.RLIMIT_NOFILE)[1]}); raise it to at least "
            f"{segments + RESERVE}")
