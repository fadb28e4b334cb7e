"""AlterUserScramCredentials (key 51), version 0 (KIP-554).

Creates, replaces and deletes users' SCRAM credentials. The client sends the salted password; the
broker keeps only StoredKey and ServerKey (broker/security/scram.py), in /config/users/<user> of the
metadata store. A user's changes apply together or not at all; one result per user named.

Errors: NONE; UNACCEPTABLE_CREDENTIAL (empty user name, empty salt or salted password, iterations
outside 4096-16384); UNSUPPORTED_SASL_MECHANISM (unknown mechanism code); DUPLICATE_RESOURCE (a user
and mechanism named twice); RESOURCE_NOT_FOUND (deleting a credential that does not exist);
KAFKA_STORAGE_ERROR (the metadata store's file could not be written: a full disk).
"""

from __future__ import annotations

from collections import Counter

from broker.cluster.store import StoreWriteFailed
from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from broker.security.scram import BY_CODE, MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import AlterUserScramCredentialsRequest
from protocol.messages import AlterUserScramCredentialsResponse as Response

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS


def _upsert_error(upsert) -> tuple[int, str] | None:
    if upsert.mechanism not in BY_CODE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {upsert.mechanism}"
    if upsert.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations: at least {MIN_ITERATIONS}"
    if upsert.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations: at most {MAX_ITERATIONS}"
    if not upsert.salt or not upsert.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


_Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
_Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion


@handles(API_KEY, "0")
async def alter_user_scram_credentials(broker: BrokerContext,
                                       request: Request[AlterUserScramCredentialsRequest],
                                       connection: RequestContext) -> Response:
    body, credentials = request.body, broker.credentials
    changes: list[_Deletion | _Upsertion] = [*body.deletions, *body.upsertions]
    if not allowed_on_cluster(broker, connection, Operation.ALTER):
        return Response(throttle_time_ms=0, results=[
            Response.AlterUserScramCredentialsResult(user=name, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                     error_message="ALTER on the cluster is needed")
            for name in dict.fromkeys(c.name for c in changes)])
    twice = Counter((change.name, change.mechanism) for change in changes)
    errors: dict[str, tuple[int, str]] = {}
    for change in changes:
        if not change.name:
            errors.setdefault(change.name, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"))
        elif twice[(change.name, change.mechanism)] > 1:
            errors.setdefault(change.name, (ErrorCode.DUPLICATE_RESOURCE,
                                            "A user credential cannot be altered twice in the same request"))
    for deletion in body.deletions:
        if deletion.name in errors:
            continue
        mechanism = BY_CODE.get(deletion.mechanism)
        if mechanism is None:
            errors[deletion.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                     f"Unknown SCRAM mechanism {deletion.mechanism}")
        elif await credentials.get(deletion.name, mechanism) is None:
            errors[deletion.name] = (ErrorCode.RESOURCE_NOT_FOUND,
                                     "Attempt to delete a user credential that does not exist")
    for upsert in body.upsertions:
        found = None if upsert.name in errors else _upsert_error(upsert)
        if found is not None:
            errors[upsert.name] = found
    results = []
    for name in dict.fromkeys(change.name for change in changes):
        if name in errors:
            code, message = errors[name]
            results.append(Response.AlterUserScramCredentialsResult(user=name, error_code=code, error_message=message))
            continue
        upserts = {BY_CODE[u.mechanism].name: ScramCredential.from_salted_password(
            BY_CODE[u.mechanism], bytes(u.salted_password), bytes(u.salt), u.iterations)
            for u in body.upsertions if u.name == name}
        deletions = [BY_CODE[d.mechanism].name for d in body.deletions if d.name == name]
        try:
            await credentials.alter(name, upserts, deletions)
        except StoreWriteFailed as exc:
            results.append(Response.AlterUserScramCredentialsResult(
                user=name, error_code=ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(exc)))
            continue
        results.append(Response.AlterUserScramCredentialsResult(user=name, error_code=ErrorCode.NONE,
                                                                error_message=None))
    return Response(throttle_time_ms=0, results=results)
