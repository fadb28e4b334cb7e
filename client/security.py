"""How a connection secures itself: TLS (an ssl.SSLContext) and SASL (PLAIN or SCRAM-SHA-256/512),
for the brokers' connections to each other and for library users. SCRAM's client side follows
RFC 5802 with hashlib/hmac/secrets.

    security = ClientSecurity(ssl_context=ctx, sasl_mechanism="SCRAM-SHA-512", username="u", password="p")
    await BrokerConnection(host, port, security=security).connect()
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import ssl
from dataclasses import dataclass

from protocol.errors import ErrorCode

from .errors import KafkaClientError

SASL_MECHANISMS = {"PLAIN": None, "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class AuthenticationError(KafkaClientError):
    """The broker refused our credentials, or its SCRAM answer did not prove it holds them."""


@dataclass(eq=False)
class ClientSecurity:
    # Read at each connect: a broker swaps in its inter-broker listener's new key material at runtime.
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True  # ssl.endpoint.identification.algorithm=https
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""

    def __post_init__(self) -> None:
        if self.sasl_mechanism is not None and self.sasl_mechanism not in SASL_MECHANISMS:
            raise ValueError(f"SASL mechanism {self.sasl_mechanism!r} is not one of {', '.join(SASL_MECHANISMS)}")


class SaslClient:
    """The client's side of one exchange: `first()` gives the opening token, `answer(server_token)` the
    next one or None when the exchange is over (and `verify_final` checks SCRAM's last message)."""

    def __init__(self, security: ClientSecurity):
        self.mechanism = security.sasl_mechanism or ""
        self.username, self.password = security.username, security.password
        self.hash_name = SASL_MECHANISMS[self.mechanism]
        self._nonce = secrets.token_urlsafe(24)
        self._client_first_bare = ""
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        if self.hash_name is None:  # PLAIN: authzid NUL user NUL password
            return b"\x00" + self.username.encode() + b"\x00" + self.password.encode()
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={name},r={self._nonce}"
        return f"n,,{self._client_first_bare}".encode()

    def answer(self, server_first: bytes) -> bytes:
        """SCRAM's client-final message for the server-first message."""
        assert self.hash_name is not None
        text = server_first.decode("utf-8", "replace")
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), fields.get("i", "")
        if not nonce.startswith(self._nonce) or not salt or not iterations.isdigit():
            raise AuthenticationError(ErrorCode.SASL_AUTHENTICATION_FAILED,
                                      f"malformed SCRAM server-first message {text[:80]!r}")
        self._salted = hashlib.pbkdf2_hmac(self.hash_name, self.password.encode(), base64.b64decode(salt),
                                           int(iterations))
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = self._hmac(self._salted, b"Client Key")
        signature = self._hmac(hashlib.new(self.hash_name, client_key).digest(), self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_final(self, server_final: bytes) -> None:
        expected = b"v=" + base64.b64encode(self._hmac(self._hmac(self._salted, b"Server Key"), self._auth_message))
        if not hmac.compare_digest(server_final, expected):
            raise AuthenticationError(ErrorCode.SASL_AUTHENTICATION_FAILED,
                                      "the broker's SCRAM signature does not match: it does not hold our credential")

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        assert self.hash_name is not None
        return hmac.new(key, message, self.hash_name).digest()
