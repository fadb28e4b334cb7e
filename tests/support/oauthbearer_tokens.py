"""Unsecured JWS tokens (RFC 7515 with {"alg":"none"}) and OAUTHBEARER first messages (RFC 7628), as a
client builds them, for the tests of Ebb's OAUTHBEARER."""

from __future__ import annotations

import base64
import json


def jws(claims: dict, header: dict | None = None, signature: str = "", encode=base64.urlsafe_b64encode) -> str:
    def part(value: dict) -> str:
        return encode(json.dumps(value).encode()).decode().rstrip("=")
    return f"{part({'alg': 'none'} if header is None else header)}.{part(claims)}.{signature}"


def raw_jws(claims: str, header: str = '{"alg":"none"}') -> str:
    """An unsecured JWS of JSON text as given (hostile or malformed JSON, which json.dumps cannot write)."""
    def part(text: str) -> str:
        return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).decode().rstrip("=")
    return f"{part(header)}.{part(claims)}."


def initial(token: str, authzid: str = "", extensions: str = "") -> bytes:
    """The client's first message: GS2 header, ^A, auth=Bearer <token>, ^A, extensions (each ending ^A), ^A."""
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{extensions}\x01".encode()
