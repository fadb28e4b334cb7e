"""Subscription regexes of KIP-848 consumer groups: checked and matched on RE2, as Kafka's on RE2J."""

from __future__ import annotations

import functools
from collections.abc import Iterable

import re2

from broker.group.group import GroupError
from protocol.errors import ErrorCode

# Longer patterns are refused (INVALID_REGULAR_EXPRESSION): Ebb's bound on what one heartbeat may make
# the coordinator compile (Kafka sets none; a 100k-alternative pattern takes RE2 0.15 s).
MAX_REGEX_LENGTH = 10_000

# Subscription regexes run on RE2, as Kafka's on RE2J: the same syntax (no lookaround, backreferences
# or possessive quantifiers) and matching in linear time, so that no pattern can hold the event loop.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a client's bad pattern is its answer, not the broker's stderr


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re2._Regexp:
    return re2.compile(pattern, _RE2_OPTIONS)


def check_regex(pattern: str) -> None:
    """INVALID_REGULAR_EXPRESSION for a pattern RE2 refuses, or one over MAX_REGEX_LENGTH."""
    if len(pattern) > MAX_REGEX_LENGTH:
        raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                         f"SubscribedTopicRegex is {len(pattern)} characters long; at most {MAX_REGEX_LENGTH} "
                         "are taken.")
    try:
        _compiled(pattern)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                         f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {why}.") from None


def matching(pattern: str, names: Iterable[str]) -> list[str]:
    """The topics a subscription regex names: the whole name must match (internal topics too, as Kafka)."""
    compiled = _compiled(pattern)
    return sorted(n for n in names if compiled.fullmatch(n))
