"""One connection's SASL authentication on a SASL listener, as Kafka's server authenticator runs it:

    ApiVersions*  ->  SaslHandshake(mechanism)  ->  SaslAuthenticate(token)+  ->  authenticated
                                  \\ v0: the tokens follow as bare size-prefixed frames (KIP-43)

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are served; anything else,
an unsupported mechanism or failed credentials end the connection (after the error answer, where
Kafka sends one).

KIP-368: a session has a lifetime when connections.max.reauth.ms is set for its mechanism or its
credential expires (OAUTHBEARER's exp), whichever ends first (`session_lifetime_ms`). A session with one
may re-authenticate on the same connection (a SaslHandshake while authenticated, at most once a second,
as Kafka's KafkaChannel): the same mechanism and the same principal, else the connection closes; once
it has expired, any other request closes the connection (broker/server.py).
"""

from __future__ import annotations

import time
from enum import Enum

from broker.security.credentials import CredentialStore
from broker.security.errors import AuthenticationFailed, InvalidCredentials
from broker.security.oauthbearer import OAUTHBEARER, OAuthBearerServer
from broker.security.plain import check_plain
from broker.security.principal import user
from broker.security.sasl_config import PLAIN, SaslListener
from broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.security.scram import ScramServer
from protocol.enums import ApiKey


class Stage(Enum):
    HANDSHAKE = "handshake"  # waiting for SaslHandshake (ApiVersions allowed)
    AUTHENTICATE = "authenticate"  # tokens in SaslAuthenticate requests (handshake v1)
    RAW_TOKENS = "raw tokens"  # tokens as bare frames (handshake v0)
    DONE = "authenticated"
    FAILED = "failed"


MIN_REAUTH_INTERVAL_NS = 1_000_000_000  # KafkaChannel: at most one re-authentication a second


def session_lifetime_ms(max_reauth_ms: int, credential_expiry_ms: int | None, now_ms: int) -> int | None:
    """The SessionLifetimeMs Kafka's SaslServerAuthenticator answers, or None when the session does not
    expire: the configured maximum (when positive), capped by the credential's remaining life, never
    negative. A credential with an expiry gives a lifetime even when the maximum is 0 (OAUTHBEARER)."""
    if credential_expiry_ms is None and max_reauth_ms <= 0:
        return None
    if credential_expiry_ms is None:
        return max_reauth_ms
    remaining = credential_expiry_ms - now_ms
    return max(0, remaining if max_reauth_ms <= 0 else min(remaining, max_reauth_ms))


class SaslSession:
    def __init__(self, listener: SaslListener, credentials: CredentialStore):
        self.listener = listener
        self.credentials = credentials
        self.stage = Stage.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramServer | None = None
        self._oauthbearer: OAuthBearerServer | None = None
        # KIP-368: what the last authentication answered, and when (time.monotonic_ns) the session ends
        self.lifetime_ms = 0
        self.expires_ns: int | None = None
        self._last_reauth_ns: int | None = None
        self.reauthentications = 0  # begun on this connection
        # while re-authenticating: the mechanism and principal that must not change
        self._previous: tuple[str, str] | None = None
        self._bad_mechanism: str | None = None  # the refusal of a changed mechanism, given at its first token

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def expired(self, now_ns: int) -> bool:
        """Has the session outlived its lifetime (KafkaChannel.serverAuthenticationSessionExpired)?"""
        return self.expires_ns is not None and now_ns - self.expires_ns > 0

    def begin_reauthentication(self, now_ns: int) -> bool:
        """A SaslHandshake while authenticated: True when it starts a re-authentication, as Kafka's
        maybeBeginServerReauthentication decides (the session has a lifetime and the last one began a
        second ago or more); False: it is served as an ordinary request (ILLEGAL_SASL_STATE)."""
        if self.stage is not Stage.DONE or self.expires_ns is None:
            return False
        if self._last_reauth_ns is not None and now_ns - self._last_reauth_ns < MIN_REAUTH_INTERVAL_NS:
            return False
        self._last_reauth_ns = now_ns
        self.reauthentications += 1
        assert self.mechanism is not None and self.principal is not None
        self._previous = (self.mechanism, self.principal)
        self._scram = self._oauthbearer = None
        self.stage = Stage.HANDSHAKE
        return True

    @property
    def authenticated(self) -> bool:
        return self.stage is Stage.DONE

    def admits(self, api_key: int) -> bool:
        """May a request of this API be served at this stage?"""
        if self.stage is Stage.DONE:
            return True
        if self.stage is Stage.HANDSHAKE:
            return api_key in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE)
        return self.stage is Stage.AUTHENTICATE and api_key == ApiKey.SASL_AUTHENTICATE

    def handshake(self, mechanism: str, version: int) -> bool:
        """Choose the mechanism; False (and the session fails) when the listener does not offer it."""
        if mechanism not in self.listener.mechanisms:
            self.stage = Stage.FAILED
            return False
        if self._previous is not None and mechanism != self._previous[0]:
            # Kafka accepts the handshake and refuses at the first token, with no answer to it
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                   f"re-authentication of mechanism '{self._previous[0]}'")
        self.mechanism = mechanism
        self.stage = Stage.RAW_TOKENS if version == 0 else Stage.AUTHENTICATE
        return True

    async def authenticate(self, token: bytes) -> bytes:
        """Take the client's next token and return the server's; AuthenticationFailed ends the session."""
        try:
            if self._bad_mechanism is not None:
                raise Unanswered(self._bad_mechanism)
            return await self._step(token)
        except InvalidCredentials as exc:
            self.stage = Stage.FAILED
            if self.reauthenticating:
                raise InvalidCredentials(exc.mechanism, "re-authentication") from None
            raise
        except AuthenticationFailed:
            self.stage = Stage.FAILED
            raise

    async def _step(self, token: bytes) -> bytes:
        if self.mechanism == PLAIN:
            self._succeed(check_plain(token, self.listener.plain_users))
            return b""
        if self.mechanism == OAUTHBEARER:
            if self._oauthbearer is None:
                assert self.listener.oauthbearer is not None  # sasl_listeners sets it with the mechanism
                self._oauthbearer = OAuthBearerServer(self.listener.oauthbearer)
            reply = self._oauthbearer.respond(token)
            if self._oauthbearer.principal is not None:
                self._succeed(self._oauthbearer.principal, self._oauthbearer.lifetime_ms)
            return reply
        mechanism = SCRAM_MECHANISMS[self.mechanism or ""]
        if self._scram is None:
            self._scram = ScramServer(mechanism)
            name = self._scram.client_first(token)
            return self._scram.server_first(await self.credentials.get(name, mechanism))
        final = self._scram.client_final(token)
        self._succeed(self._scram.username or "")
        return final

    def _succeed(self, name: str, credential_expiry_ms: int | None = None) -> None:
        principal = user(name)
        if self._previous is not None and principal != self._previous[1]:
            raise AuthenticationFailed("Cannot change principals during re-authentication from "
                                       f"{_dotted(self._previous[1])}: {_dotted(principal)}")
        assert self.mechanism is not None
        lifetime = session_lifetime_ms(self.listener.max_reauth_ms.get(self.mechanism, 0), credential_expiry_ms,
                                       int(time.time() * 1000))
        self.lifetime_ms = lifetime or 0
        self.expires_ns = None if lifetime is None else time.monotonic_ns() + lifetime * 1_000_000
        self.principal = principal
        self._previous = None
        self.stage = Stage.DONE


class Unanswered(AuthenticationFailed):
    """A refusal Kafka gives no answer to: the connection just closes."""


def _dotted(principal: str) -> str:
    """User:alice as Kafka's re-authentication refusal spells it: User.alice."""
    kind, _, name = principal.partition(":")
    return f"{kind}.{name}"
