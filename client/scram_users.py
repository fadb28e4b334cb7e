"""SCRAM users through KIP-554's APIs: the password is salted here (PBKDF2 with the mechanism's HMAC,
RFC 5802's Hi()), so it never leaves the client; the broker keeps only the derived keys.

    async with Admin("127.0.0.1:9092") as admin:
        await set_scram_password(admin, "alice", "SCRAM-SHA-512", "alice-secret", iterations=8192)
        print(await describe_scram_users(admin))          # {"alice": {"SCRAM-SHA-512": 8192}}
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable

from protocol.enums import ApiKey
from protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)

from .admin import Admin
from .errors import error_for

MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
NAMES = {code: name for name, (code, _) in MECHANISMS.items()}
DEFAULT_ITERATIONS = 4096  # Kafka's minimum and kafka-configs' default


def mechanism_code(name: str) -> int:
    if name not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {name!r}; use {' or '.join(MECHANISMS)}")
    return MECHANISMS[name][0]


async def set_scram_password(admin: Admin, user: str, mechanism: str, password: str, *,
                             iterations: int = DEFAULT_ITERATIONS) -> None:
    code, hash_name = mechanism_code(mechanism), MECHANISMS[mechanism][1]
    salt = secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user, mechanism=code, iterations=iterations, salt=salt, salted_password=salted)
    await _alter(admin, AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsert]))


async def delete_scram_credential(admin: Admin, user: str, mechanism: str) -> None:
    deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion(name=user, mechanism=mechanism_code(mechanism))
    await _alter(admin, AlterUserScramCredentialsRequest(deletions=[deletion], upsertions=[]))


async def _alter(admin: Admin, request: AlterUserScramCredentialsRequest) -> None:
    conn = await admin.cluster.any_connection()
    response = await conn.request(request, version=conn.pick_version(ApiKey.ALTER_USER_SCRAM_CREDENTIALS))
    for result in response.results:
        if result.error_code:
            raise error_for(result.error_code, result.error_message or f"SCRAM credentials of {result.user!r}")


async def describe_scram_users(admin: Admin, users: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """user -> {mechanism: iterations}; every user with a credential when `users` is None."""
    names = None if users is None else [DescribeUserScramCredentialsRequest.UserName(name=u) for u in users]
    conn = await admin.cluster.any_connection()
    response = await conn.request(DescribeUserScramCredentialsRequest(users=names),
                                  version=conn.pick_version(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS))
    if response.error_code:
        raise error_for(response.error_code, response.error_message or "DescribeUserScramCredentials")
    found = {}
    for result in response.results:
        if result.error_code:
            raise error_for(result.error_code, result.error_message or f"SCRAM credentials of {result.user!r}")
        found[result.user] = {NAMES.get(c.mechanism, str(c.mechanism)): c.iterations for c in result.credential_infos}
    return found
