"""One connection's SASL authentication on a SASL listener, as Kafka's server authenticator runs it:

    ApiVersions*  ->  SaslHandshake(mechanism)  ->  SaslAuthenticate(token)+  ->  authenticated
                                  \\ v0: the tokens follow as bare size-prefixed frames (KIP-43)

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are served; anything else,
an unsupported mechanism or failed credentials end the connection (after the error answer, where
Kafka sends one).
"""

from __future__ import annotations

from enum import Enum

from broker.security.credentials import CredentialStore
from broker.security.errors import AuthenticationFailed
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


class SaslSession:
    def __init__(self, listener: SaslListener, credentials: CredentialStore):
        self.listener = listener
        self.credentials = credentials
        self.stage = Stage.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramServer | None = None
        self._oauthbearer: OAuthBearerServer | None = None

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
        self.mechanism = mechanism
        self.stage = Stage.RAW_TOKENS if version == 0 else Stage.AUTHENTICATE
        return True

    async def authenticate(self, token: bytes) -> bytes:
        """Take the client's next token and return the server's; AuthenticationFailed ends the session."""
        try:
            return await self._step(token)
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
                self._succeed(self._oauthbearer.principal)
            return reply
        mechanism = SCRAM_MECHANISMS[self.mechanism or ""]
        if self._scram is None:
            self._scram = ScramServer(mechanism)
            name = self._scram.client_first(token)
            return self._scram.server_first(await self.credentials.get(name, mechanism))
        final = self._scram.client_final(token)
        self._succeed(self._scram.username or "")
        return final

    def _succeed(self, name: str) -> None:
        self.principal = user(name)
        self.stage = Stage.DONE
