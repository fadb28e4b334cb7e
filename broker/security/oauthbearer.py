"""SASL OAUTHBEARER (RFC 7628) on the server side with Kafka's default validator, the one a broker uses
when no `sasl.server.callback.handler.class` is set (OAuthBearerUnsecuredValidatorCallbackHandler):
unsecured JWS tokens ({"alg":"none"}, empty signature), for development and tests as in Kafka.

    client initial response   n,[a=<authzid>],^Aauth=Bearer <token>^A[key=value^A...]^A
    good token                -> empty reply, authenticated as User:<principal claim>
    rejected token            -> the JSON error as a challenge ({"status":"invalid_token"}); the client
                                 answers ^A and is then refused with that JSON as the message

The validator's options come from the listener's OAuthBearerLoginModule JAAS entry:
unsecuredValidatorPrincipalClaimName (default sub), unsecuredValidatorScopeClaimName (default scope),
unsecuredValidatorRequiredScope (space-separated), unsecuredValidatorAllowableClockSkewMs (default 0).
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
import unicodedata
from dataclasses import dataclass

from broker.java_math import java_int, java_round, java_trim
from broker.security.errors import AuthenticationFailed, InvalidCredentials
from client.jaas import JaasEntry

OAUTHBEARER = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_SEP = "\x01"
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"  # any ASCII but "," and "=", which are escaped
_KVPAIRS = rf"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+{_SEP})*"
_INITIAL = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEP}(?P<kvpairs>{_KVPAIRS}){_SEP}", re.S)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")


@dataclass(frozen=True)
class UnsecuredValidator:
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_jaas(cls, entry: JaasEntry) -> UnsecuredValidator:
        """The validator a listener's JAAS entry configures; ValueError for a setting Kafka would reject."""
        if entry.login_module != LOGIN_MODULE:
            raise ValueError(f"{OAUTHBEARER} needs {LOGIN_MODULE}, not {entry.login_module}")
        options = entry.options
        return cls(principal_claim=java_trim(options.get("unsecuredValidatorPrincipalClaimName", "")) or "sub",
                   scope_claim=java_trim(options.get("unsecuredValidatorScopeClaimName", "")) or "scope",
                   required_scope=_required_scope(options.get("unsecuredValidatorRequiredScope", "")),
                   clock_skew_ms=_clock_skew(options.get("unsecuredValidatorAllowableClockSkewMs", "")))


_SCOPE_ITEM = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")  # RFC 6749 3.3, as OAuthBearerScopeUtils checks it


def _required_scope(text: str) -> tuple[str, ...]:
    """OAuthBearerScopeUtils.parseScope of the trimmed option: split on " " only, each item a valid scope."""
    items = tuple(item for item in java_trim(text).split(" ") if item)
    for item in items:
        if not _SCOPE_ITEM.fullmatch(item):
            raise ValueError(f"unsecuredValidatorRequiredScope: Invalid scope value: {item}")
    return items


def _clock_skew(text: str) -> int:
    trimmed = java_trim(text)
    if not trimmed:
        return 0
    try:
        value: int | None = java_int(trimmed)
    except ValueError:
        value = None
    if value is None or not -2**31 <= value < 2**31:
        raise ValueError(f'unsecuredValidatorAllowableClockSkewMs: For input string: "{trimmed}"')
    if value < 0:
        raise ValueError(f"Allowable clock skew millis must not be negative: {text}")
    return value

class _Rejected(Exception):
    """The token does not validate; `scope` is set when only a required scope is missing."""

    def __init__(self, reason: str, scope: str | None = None):
        super().__init__(reason)
        self.scope = scope


class OAuthBearerServer:
    """One connection's exchange: `respond` takes each client token and returns the server's."""

    def __init__(self, validator: UnsecuredValidator):
        self.validator = validator
        self.error: str | None = None  # the JSON challenge sent; the client's ^A then ends the exchange
        self.principal: str | None = None
        self.lifetime_ms: int | None = None  # the accepted token's exp in ms (KIP-368's credential expiry)

    def respond(self, token: bytes) -> bytes:
        if token == b"\x01" and self.error is not None:
            raise AuthenticationFailed(self.error)
        self.error = None
        authzid, jws = _initial_response(token)
        try:
            principal, lifetime_ms = validated(jws, self.validator, time.time() * 1000)
        except _Rejected as rejected:
            # Kafka's text exactly (OAuthBearerSaslServer.jsonErrorResponse), a space before the scope
            if rejected.scope is None:
                self.error = '{"status":"invalid_token"}'
            else:
                self.error = f'{{"status":"insufficient_scope", "scope":"{rejected.scope}"}}'
            return self.error.encode()
        if authzid and authzid != principal:
            raise AuthenticationFailed(f"Authentication failed: Client requested an authorization id ({authzid}) "
                                       f"that is different from the token's principal name ({principal})")
        self.principal, self.lifetime_ms = principal, lifetime_ms
        return b""


def _initial_response(token: bytes) -> tuple[str, str]:
    """(authzid, token value) of the client's first message; AuthenticationFailed if it is not one."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidCredentials(OAUTHBEARER) from None
    match = _INITIAL.fullmatch(text)
    if match is None:
        raise InvalidCredentials(OAUTHBEARER)
    pairs = dict(item.split("=", 1) for item in match["kvpairs"].split(_SEP) if item)
    auth = _AUTH.fullmatch(pairs.get("auth", ""))
    if auth is None or auth["scheme"].lower() != "bearer":
        raise InvalidCredentials(OAUTHBEARER)
    return match["authzid"] or "", auth["token"]


def validate(jws: str, validator: UnsecuredValidator, now_ms: float) -> str:
    """The principal name of an unsecured JWS that passes Kafka's unsecured validator, or _Rejected."""
    return validated(jws, validator, now_ms)[0]


def validated(jws: str, validator: UnsecuredValidator, now_ms: float) -> tuple[str, int]:
    """(principal name, lifetime: the exp claim in ms) of a token that passes, or _Rejected."""
    if ".." in jws:
        raise _Rejected("Malformed compact serialization contains '..'")
    splits = jws.split(".")
    if len(splits) != 3:
        raise _Rejected("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
    header, claims = _json_object(splits[0]), _json_object(splits[1])
    if "alg" not in header:  # Kafka fails here without an answer (a NullPointerException); Ebb answers
        raise InvalidCredentials(OAUTHBEARER)
    if header["alg"] != "none":
        raise _Rejected("Unsecured JWS must have 'none' for an algorithm")
    if splits[2]:
        raise _Rejected("Unsecured JWS must not contain a digital signature")
    scope = _scope(claims.get(validator.scope_claim))
    exp = _number(claims, "exp")
    if exp is None:
        raise _Rejected("No expiration time in JWT")
    principal = claims.get(validator.principal_claim)
    if not isinstance(principal, str) or not java_trim(principal):  # Utils.isBlank
        raise _Rejected(f"No principal name in JWT claim: {validator.principal_claim}")
    iat = _number(claims, "iat")
    skew = validator.clock_skew_ms
    if iat is not None and 1000 * iat > now_ms + skew:
        raise _Rejected("The Issued At value was after the indicated time plus allowable clock skew")
    if now_ms - skew >= 1000 * exp:
        raise _Rejected("The indicated time minus allowable clock skew was on or after the Expiration Time value")
    if iat is not None and exp <= iat:
        raise _Rejected("The Expiration Time time was not after the Issued At time")
    for required in validator.required_scope:
        if required not in scope:
            raise _Rejected(f"The provided scope was missing a required scope ({required})",
                            scope="[" + ", ".join(validator.required_scope) + "]")
    return principal, java_round(1000 * exp)


def _json_object(split: str) -> dict[str, object]:
    """A header or claims section, as Kafka reads it: Base64URL (padding optional), then the first JSON value
    as Jackson's readTree takes it (what follows it is not read; a value that is no object, or none at all,
    has no members), its values kept as numbers, lists of strings, or text."""
    if not _BASE64URL.fullmatch(split):
        raise _Rejected("malformed Base64 URL encoded value")
    try:
        raw = base64.urlsafe_b64decode(split + "=" * (-len(split.rstrip("=")) % 4))
        text = raw.decode(json.detect_encoding(raw))
        start = _WHITESPACE.match(text).end()  # type: ignore[union-attr]
        if start == len(text):
            return {}
        if _too_deep(text, start):
            raise ValueError("nesting deeper than Jackson's limit")
        value, end = _DECODER.raw_decode(text, start)
        if end < len(text) and not _ends_root_scalar(value, text[end]):
            raise ValueError("no separator after a top-level scalar")
    # JSONDecodeError, binascii.Error, UnicodeDecodeError are ValueErrors. json.loads recurses: past ~990 levels
    # (depending on the caller's stack) it raises RecursionError where Jackson still reads up to 1000
    except (ValueError, RecursionError):
        raise _Rejected("malformed JSON") from None
    if not isinstance(value, dict):
        return {}
    if any(_SURROGATE.search(key) for key in value):  # Jackson refuses an escaped lone surrogate in a name
        raise _Rejected("malformed JSON")
    return {key: [_text(v) for v in item] if isinstance(item, list) else
            item if _is_number(item) else _text(item) for key, item in value.items()}


# Jackson's StreamReadConstraints defaults (2.21): nesting depth 1000, at most 1000 digits in a number
_MAX_DEPTH = 1000
_MAX_DIGITS = 1000
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[{]|[\]}]', re.S)
_SURROGATE = re.compile("[\ud800-\udfff]")  # left only unpaired: json joins an escaped pair


def _too_deep(text: str, start: int) -> bool:
    """Whether the first value nests deeper than Jackson allows, found without recursion (json.loads
    recurses and would raise RecursionError, a crash for the handler, well before 100000 levels)."""
    if text[start] not in "[{" or text.count("[") + text.count("{") <= _MAX_DEPTH:
        return False  # a scalar (what follows it is never read), or too few brackets to nest that deep
    depth = 0
    for match in _BRACKETS.finditer(text, start):
        token = match[0]
        if token in "[{":
            depth += 1
            if depth > _MAX_DEPTH:
                return True
        elif token in "]}":
            depth -= 1
            if depth <= 0:
                return False
    return False


def _ends_root_scalar(value: object, after: str) -> bool:
    """Whether Jackson takes `after` as the end of a top-level value: after a number only whitespace
    (_verifyRootSpace), after true/false/null no character that could continue a Java identifier."""
    if isinstance(value, bool) or value is None:
        return after < "0" or after in "]}" or not (
            after in "_$\x7f" or unicodedata.category(after)[0] == "L"
            or unicodedata.category(after) in ("Nd", "Nl", "Sc", "Pc", "Mn", "Mc", "Cf", "Cc"))
    if _is_number(value):
        return after in " \t\n\r"
    return True  # an object, a list or a string ends where its bracket or quote closes it


def _int(literal: str) -> int:
    if len(literal.lstrip("-")) > _MAX_DIGITS:
        raise ValueError("number longer than Jackson's limit")
    return int(literal)


def _float(literal: str) -> float:
    if sum(c.isdigit() for c in literal) > _MAX_DIGITS:
        raise ValueError("number longer than Jackson's limit")
    return float(literal)


def _constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # Jackson refuses NaN and Infinity as malformed


_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _text(value: object) -> str:
    """Jackson's asText: strings as they are, numbers and booleans spelled, null "null", objects and lists "".
    An unpaired surrogate (an escape json lets through) becomes "?", as Java writes it out in UTF-8."""
    if isinstance(value, str):
        return _SURROGATE.sub("?", value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value) if _is_number(value) else ""


def _number(claims: dict[str, object], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if not _is_number(value):
        raise _Rejected(f"The '{name}' claim was not of type Number")
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:  # an integer beyond a double's range: Java's doubleValue gives +-Infinity
        return math.inf if value > 0 else -math.inf  # type: ignore[operator]


def _scope(value: object) -> set[str]:
    """OAuthBearerUnsecuredJws.calculateScope: blank items (Utils.isBlank) dropped, the others trimmed."""
    if isinstance(value, str):
        return {java_trim(value)} - {""}
    if value is None:
        return set()
    if not isinstance(value, list):
        raise _Rejected("The scope claim was not of type List")
    return {java_trim(item) for item in value} - {""}
