"""Kafka principals as strings "<type>:<name>", e.g. "User:alice"; unauthenticated clients are
User:ANONYMOUS, as in Kafka."""

from __future__ import annotations

USER_TYPE = "User"
ANONYMOUS = "User:ANONYMOUS"


def user(name: str) -> str:
    return f"{USER_TYPE}:{name}"


def split(principal: str) -> tuple[str, str]:
    """("User", "alice") from "User:alice"; ValueError when there is no type."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"principal {principal!r} is not <type>:<name>")
    return kind, name
