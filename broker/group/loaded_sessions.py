"""Loaded members re-timed by their group's own session timeout (group.consumer.session.timeout.ms or
group.share.session.timeout.ms, a group config): a coordinator that rebuilt a KIP-848 or share group from
__consumer_offsets starts its members' sessions at once on the broker's default, then reads the group's
own off the loop and re-arms them with what is left of it, as Kafka times a loaded member by its group's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol, TypeVar

import structlog

from broker.cluster.store import StoreError

log = structlog.get_logger("groups")


class Timed(Protocol):
    session_timer: asyncio.TimerHandle | None


M = TypeVar("M", bound=Timed)


async def own_sessions(group_id: str, members: Callable[[], Iterable[M]],
                       group_session_ms: Callable[[str], Awaitable[int]], still_loaded: Callable[[], bool],
                       arm: Callable[[M, float], None]) -> None:
    """Re-arm `members()` by the group's own timeout once read; those that heartbeated meanwhile (their
    timer changed) have it already, and a group unloaded or replaced meanwhile is left alone."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    armed = {id(m): m.session_timer for m in members()}
    try:
        timeout_ms = await group_session_ms(group_id)
    except StoreError as exc:  # the broker's timeout stays
        log.warning("group configs not read at load", group=group_id, error=str(exc))
        return
    if not still_loaded():
        return
    left_ms = max(0.0, timeout_ms - (loop.time() - started) * 1000)
    for member in members():
        if member.session_timer is not None and armed.get(id(member)) is member.session_timer:
            arm(member, left_ms)
