"""Errors of authentication; each carries the text the client is shown."""


class AuthenticationFailed(Exception):
    """Bad credentials or a malformed SASL token: SASL_AUTHENTICATION_FAILED, then the connection closes."""
