"""Errors of authentication; each carries the text the client is shown."""


class AuthenticationFailed(Exception):
    """Bad credentials or a malformed SASL token: SASL_AUTHENTICATION_FAILED, then the connection closes."""


class InvalidCredentials(AuthenticationFailed):
    """Kafka's answer to a SaslException: only the mechanism is named (the detail could tell whether a user
    exists), and whether it was an authentication or a re-authentication (KIP-368)."""

    def __init__(self, mechanism: str, during: str = "authentication"):
        super().__init__(f"Authentication failed during {during} due to invalid credentials with SASL mechanism "
                         f"{mechanism}")
        self.mechanism = mechanism
