"""SASL PLAIN (RFC 4616) on the server side: one token "authzid NUL user NUL password", checked
against the users of the listener's JAAS entry (user_<name>="<password>"), as Kafka's PlainLoginModule."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from broker.security.errors import AuthenticationFailed
from client.jaas import JaasEntry

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """The user -> password table of a PlainLoginModule entry."""
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise ValueError(f"PLAIN needs {PLAIN_LOGIN_MODULE}, not {entry.login_module}")
    return {key[len("user_"):]: value for key, value in entry.options.items() if key.startswith("user_")}


def check_plain(token: bytes, users: Mapping[str, str]) -> str:
    """The authenticated user name, or AuthenticationFailed."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        raise AuthenticationFailed("Authentication failed: PLAIN token must be authzid NUL user NUL password")
    try:
        authzid, user, password = (part.decode("utf-8") for part in parts)
    except UnicodeDecodeError:
        raise AuthenticationFailed("Authentication failed: PLAIN token is not UTF-8") from None
    if not user or not password:
        raise AuthenticationFailed("Authentication failed: username or password is empty")
    if authzid and authzid != user:
        raise AuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is different from username")
    expected = users.get(user)
    # compare_digest on both paths so that a missing user costs the same time as a wrong password
    matches = hmac.compare_digest(password.encode(), (expected if expected is not None else "\x00").encode())
    if expected is None or not matches:
        raise AuthenticationFailed("Authentication failed: Invalid username or password")
    return user
