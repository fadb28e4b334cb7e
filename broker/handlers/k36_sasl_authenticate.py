"""SaslAuthenticate (key 36), versions 0-2.

Carries one SASL token each way after a v1 SaslHandshake: PLAIN takes one round, SCRAM two. Bad
credentials or a malformed token: SASL_AUTHENTICATION_FAILED with the reason, and the connection
closes. Outside an authentication (a listener without SASL, or after success): ILLEGAL_SASL_STATE.
SessionLifetimeMs (v1+) is KIP-368's: how long the session may serve requests before the client must
re-authenticate (`sasl_session.session_lifetime_ms`); 0 when it does not expire. In a re-authentication
another principal is refused (SASL_AUTHENTICATION_FAILED) and a changed mechanism closes the connection
at its first token without an answer, as Kafka.

Errors: NONE, SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from broker.security.errors import AuthenticationFailed
from broker.security.sasl_session import Unanswered
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import SaslAuthenticateRequest, SaslAuthenticateResponse

API_KEY = ApiKey.SASL_AUTHENTICATE


@handles(API_KEY, "0-2")
async def sasl_authenticate(broker: BrokerContext, request: Request[SaslAuthenticateRequest],
                            connection: RequestContext) -> SaslAuthenticateResponse | None:
    session = connection.sasl
    if session is None or session.authenticated:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"",
                                        error_message="SaslAuthenticate outside a SASL authentication",
                                        session_lifetime_ms=0)
    try:
        reply = await session.authenticate(bytes(request.body.auth_bytes))
    except Unanswered:
        return None  # the session has failed: the server closes the connection
    except AuthenticationFailed as exc:
        return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc),
                                        auth_bytes=b"", session_lifetime_ms=0)
    # v0 cannot carry the lifetime: its session expires all the same (as in Kafka, which counts such clients)
    lifetime = session.lifetime_ms if session.authenticated and request.api_version >= 1 else 0
    # "" rather than null: Kafka's answer leaves the message at its generated default
    return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message="", auth_bytes=reply,
                                    session_lifetime_ms=lifetime)
