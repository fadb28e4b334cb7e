"""Typed errors raised by the client. Every one carries the Kafka ErrorCode that best describes it.

Two families: `KafkaError` is a code the broker sent back; `BrokerConnectionError` and
`RequestTimeoutError` are what happened on our side of the socket. Both subclass the matching builtin
(ConnectionError, TimeoutError) so callers that only know the standard library still catch them.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.errors import CodedError, ErrorCode, FixedCodeError


class KafkaClientError(CodedError):
    """Base of every client error: (code, message) as protocol.errors.CodedError carries them."""

    @property
    def retriable(self) -> bool:
        return self.error_code.retriable


class KafkaError(KafkaClientError):
    """An error code returned by a broker."""

    def __init__(self, error_code: ErrorCode | int, message: str | None = None):
        code = ErrorCode.from_code(int(error_code))
        super().__init__(code, f"{code.name}: {message}" if message else code.name)


class UnsupportedVersionError(KafkaError):
    """The broker does not offer any version of an API we can speak (or not the one a feature needs)."""

    def __init__(self, message: str | None = None):
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)


class UnknownTopicOrPartitionError(KafkaError):
    def __init__(self, message: str | None = None):
        super().__init__(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message)


class TopicAlreadyExistsError(KafkaError):
    def __init__(self, message: str | None = None):
        super().__init__(ErrorCode.TOPIC_ALREADY_EXISTS, message)


class OffsetOutOfRangeError(KafkaError):
    """A fetch position outside [log start offset, log end offset], e.g. below records just deleted."""

    def __init__(self, topic: str, partition: int, offset: int, message: str | None = None):
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE,
                         message or f"offset {offset} is out of range for {topic}-{partition}")
        self.topic = topic
        self.partition = partition
        self.offset = offset


# Each takes the message only: its code is its own.
_TYPED: dict[ErrorCode, Callable[[str | None], KafkaError]] = {
    ErrorCode.UNSUPPORTED_VERSION: UnsupportedVersionError,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: UnknownTopicOrPartitionError,
    ErrorCode.TOPIC_ALREADY_EXISTS: TopicAlreadyExistsError,
}


def error_for(error_code: ErrorCode | int, message: str | None = None) -> KafkaError:
    """The most specific KafkaError for a code (OffsetOutOfRangeError needs context; build it directly)."""
    code = ErrorCode.from_code(int(error_code))
    cls = _TYPED.get(code)
    return cls(message) if cls is not None else KafkaError(code, message)


class BrokerConnectionError(FixedCodeError, KafkaClientError, ConnectionError):
    """The connection to a broker failed. `request_sent` tells whether the request may have reached it."""

    error_code = ErrorCode.NETWORK_EXCEPTION

    def __init__(self, message: str, *, host: str = "", port: int = 0, request_sent: bool = False):
        super().__init__(message)
        self.host = host
        self.port = port
        self.request_sent = request_sent


class BrokerUnreachableError(BrokerConnectionError):
    """Could not open a connection (refused, unresolvable, or the connect timed out). Nothing was sent."""


class ConnectionClosedError(BrokerConnectionError):
    """The connection closed, by either side, before a response arrived."""


class RequestTimeoutError(FixedCodeError, KafkaClientError, TimeoutError):
    """No response within the request timeout. The broker may still have acted on the request."""

    error_code = ErrorCode.REQUEST_TIMED_OUT


class MalformedResponseError(FixedCodeError, KafkaClientError):
    """A response frame that does not decode as the API and version we asked for."""

    error_code = ErrorCode.CORRUPT_MESSAGE

    @property
    def retriable(self) -> bool:
        return False  # asking again gets the same bytes back


class BootstrapError(FixedCodeError, KafkaClientError, ValueError):
    """A bootstrap server list we cannot parse."""

    error_code = ErrorCode.INVALID_CONFIG


def is_retriable(exc: BaseException) -> bool:
    """Worth another attempt after a metadata refresh and a backoff."""
    return isinstance(exc, KafkaClientError) and exc.retriable
