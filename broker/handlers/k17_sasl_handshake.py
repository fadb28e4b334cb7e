"""SaslHandshake (key 17), versions 0-1.

On a SASL listener before authentication: the client names its mechanism. One the listener offers is
accepted (NONE, with the listener's mechanisms); v1 clients then send SaslAuthenticate requests, v0
clients bare tokens (KIP-43). Any other mechanism: UNSUPPORTED_SASL_MECHANISM with the list, and the
connection closes. Once authenticated, a session with a lifetime (KIP-368: connections.max.reauth.ms, or
an OAUTHBEARER token's exp) re-authenticates with it (the server begins that, broker/server.py); a
different mechanism the listener offers is accepted here and refused at the next token, one it does not
offer closes the connection unanswered, as Kafka does.
On a listener without SASL, or once authenticated otherwise (no session lifetime, or the last
re-authentication began less than a second ago): ILLEGAL_SASL_STATE, as Kafka's request handler answers.

Errors: NONE, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.request_context import RequestContext
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import SaslHandshakeRequest, SaslHandshakeResponse

API_KEY = ApiKey.SASL_HANDSHAKE


@handles(API_KEY, "0-1")
async def sasl_handshake(broker: BrokerContext, request: Request[SaslHandshakeRequest],
                         connection: RequestContext) -> SaslHandshakeResponse | None:
    session = connection.sasl
    if session is None or session.authenticated:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    offered = list(session.listener.mechanisms)
    if not session.handshake(request.body.mechanism, request.api_version):
        if session.reauthenticating:  # Kafka's re-authentication fails before its answer is sent
            return None
        return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=offered)
    return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=offered)
