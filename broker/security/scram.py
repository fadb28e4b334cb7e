"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server side, with the standard library.

Credentials are kept as Kafka keeps them: salt, StoredKey = H(ClientKey), ServerKey and the iteration
count, never the password. A client proves it knows the password without sending it; the broker proves
it holds the credential by its final signature.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from broker.security.errors import AuthenticationFailed, InvalidCredentials


@dataclass(frozen=True)
class ScramMechanism:
    name: str
    code: int  # in AlterUserScramCredentials / DescribeUserScramCredentials
    hash_name: str

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi() of RFC 5802: PBKDF2 with this mechanism's HMAC."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_CODE = {m.code: m for m in MECHANISMS.values()}
# Kafka's bounds on the iteration count of a stored credential.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salted: bytes, salt: bytes,
                             iterations: int) -> ScramCredential:
        client_key = mechanism.hmac(salted, b"Client Key")
        return cls(salt, mechanism.hash(client_key), mechanism.hmac(salted, b"Server Key"), iterations)

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = salt if salt is not None else secrets.token_bytes(32)
        return cls.from_salted_password(mechanism, mechanism.salted_password(password, salt, iterations), salt,
                                        iterations)

    def to_text(self) -> str:
        """Kafka's stored form: salt=..,stored_key=..,server_key=..,iterations=N (base64 values)."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                       base64.b64decode(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def _text(token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("SCRAM message is not UTF-8") from None


def _attributes(message: str) -> list[tuple[str, str]]:
    pairs = []
    for item in message.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1:
            raise AuthenticationFailed(f"malformed SCRAM message attribute {item[:40]!r}")
        pairs.append((key, value))
    return pairs


def _unescape_username(name: str) -> str:
    # RFC 5802 saslname: ',' and '=' travel as =2C and =3D; any other '=' is malformed.
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i + 1:i + 3]
            if code not in ("2C", "3D"):
                raise AuthenticationFailed("malformed user name in SCRAM message")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


class ScramServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism):
        self.mechanism = mechanism
        self.username: str | None = None
        self.credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.done = False

    def client_first(self, token: bytes) -> str:
        """Parse the client's first message; returns the user name whose credential `server_first` needs."""
        text = _text(token)
        gs2_flag, _, rest = text.partition(",")
        authzid, sep, bare = rest.partition(",")
        if gs2_flag not in ("n", "y") or not sep:
            raise AuthenticationFailed("SCRAM channel binding is not supported; expected an 'n,,' header")
        attributes = _attributes(bare)
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r" or not attributes[1][1]:
            raise AuthenticationFailed("SCRAM client-first message needs n=<user>,r=<nonce>")
        if any(key == "m" for key, _ in attributes):
            raise AuthenticationFailed("SCRAM mandatory extensions are not supported")
        if any(key == "t" or (key, value) == ("tokenauth", "true") for key, value in attributes[2:]):
            raise AuthenticationFailed("delegation tokens are not supported")
        username = _unescape_username(attributes[0][1])
        if authzid and authzid != f"a={attributes[0][1]}":
            raise AuthenticationFailed("the authorization id must equal the user name")
        self._client_first_bare = bare
        self._nonce = attributes[1][1] + secrets.token_urlsafe(24)
        self.username = username
        return username

    def server_first(self, credential: ScramCredential | None) -> bytes:
        # An unknown user gets a made-up salt so that the exchange looks the same and fails at the proof.
        self.credential = credential
        salt = credential.salt if credential else secrets.token_bytes(32)
        iterations = credential.iterations if credential else MIN_ITERATIONS
        self._server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        return self._server_first.encode()

    def client_final(self, token: bytes) -> bytes:
        text = _text(token)
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise AuthenticationFailed("SCRAM client-final message has no proof")
        attributes = dict(_attributes(without_proof))
        if attributes.get("r") != self._nonce:
            raise AuthenticationFailed("SCRAM nonce mismatch")
        if attributes.get("c") not in ("biws", "eSws"):  # base64 of "n,," and "y,,"
            raise AuthenticationFailed("SCRAM channel binding is not supported")
        try:
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError:
            raise AuthenticationFailed("SCRAM proof is not base64") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        credential = self.credential
        if credential is None or len(proof) != len(credential.stored_key):
            raise InvalidCredentials(self.mechanism.name)
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise InvalidCredentials(self.mechanism.name)
        self.done = True
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
