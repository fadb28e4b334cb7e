"""structlog setup: key=value lines on a terminal, JSON lines otherwise (containers, files); and the
level of each logger, which BROKER_LOGGER changes at runtime (`kafka-configs --entity-type
broker-loggers`).

A logger is what a module gets from `structlog.get_logger("<name>")`. Every event passes the filter
of `LEVELS`: its logger's own level if one was set, else the root's (`log.level` at start-up). Levels
are Kafka's (log4j's) names; Ebb's output has nothing below DEBUG, so TRACE and ALL show DEBUG.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

ROOT = "root"
# Kafka's log levels -> the least severe event each lets through (OFF: none).
KAFKA_LEVELS = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR,
                "WARN": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG,
                "TRACE": logging.DEBUG, "ALL": logging.DEBUG}
_PYTHON_NAMES = {"WARNING": "WARN", "CRITICAL": "FATAL"}  # log.level may use Python's names
_METHOD_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "msg": logging.INFO, "warning": logging.WARNING,
                  "warn": logging.WARNING, "error": logging.ERROR, "exception": logging.ERROR,
                  "critical": logging.CRITICAL, "fatal": logging.CRITICAL}


def kafka_level(level: str) -> str:
    """`level` under Kafka's name (INFO, WARN, ...); ValueError if it is not a level."""
    name = level.strip().upper()
    name = _PYTHON_NAMES.get(name, name)
    if name not in KAFKA_LEVELS:
        raise ValueError(level)
    return name


class LogLevels:
    """The root level and the levels set for single loggers."""

    def __init__(self, root: str = "INFO") -> None:
        self.root = kafka_level(root)
        self.by_logger: dict[str, str] = {}
        self._seen: set[str] = set()

    def level_of(self, name: str) -> str:
        return self.root if name == ROOT else self.by_logger.get(name, self.root)

    def set(self, name: str, level: str) -> None:
        if name == ROOT:
            self.root = kafka_level(level)
        else:
            self.by_logger[name] = kafka_level(level)

    def unset(self, name: str) -> None:
        """Back to the root's level."""
        self.by_logger.pop(name, None)

    def names(self) -> list[str]:
        """root and every logger of the modules loaded (Kafka lists the loggers that exist)."""
        found = {ROOT, *self._seen}
        for module in list(sys.modules.values()):
            for value in list(getattr(module, "__dict__", {}).values()):
                if isinstance(value, structlog._config.BoundLoggerLazyProxy):
                    args = value._logger_factory_args
                    if args and isinstance(args[0], str):
                        found.add(args[0])
        return sorted(found)

    def seen(self, name: str) -> None:
        self._seen.add(name)

    def drop_below_level(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
                         ) -> MutableMapping[str, Any]:
        """The structlog processor: an event under its logger's level goes no further."""
        name = getattr(logger, "name", ROOT)
        if _METHOD_LEVELS.get(method_name, logging.INFO) < KAFKA_LEVELS[self.level_of(name)]:
            raise structlog.DropEvent
        return event_dict


LEVELS = LogLevels()  # the process's (logging is process-wide)


class _NamedPrintLogger(structlog.PrintLogger):
    def __init__(self, file: TextIO, name: str) -> None:
        super().__init__(file)
        self.name = name


def configure(level: str = "INFO", json: bool | None = None) -> None:
    if json is None:
        json = not sys.stderr.isatty()
    LEVELS.set(ROOT, level)
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    stream = sys.stderr

    def named_logger(*args: Any) -> _NamedPrintLogger:
        name = args[0] if args and isinstance(args[0], str) else ROOT
        LEVELS.seen(name)
        return _NamedPrintLogger(stream, name)

    structlog.configure(
        processors=[
            LEVELS.drop_below_level,  # first: a dropped event costs nothing more
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        # Every level reaches the processors, so that one logger can be turned up at runtime.
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=named_logger,
        cache_logger_on_first_use=True,
    )
