"""How the `ebb` admin commands print: aligned tables or JSON on stdout, messages and progress on stderr."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Awaitable, Iterable, Sequence
from typing import TextIO, TypeVar

import structlog

PROGRESS_MIN_ITEMS = 10  # fewer partitions than this finish too fast for a bar to help
BAR_WIDTH = 30
_T = TypeVar("_T")


def configure_logging(verbose: int = 0) -> None:
    """Client logs go to stderr, warnings only unless -v (info) or -vv (debug); stdout stays for results."""
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


def cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) if value else "-"
    return str(value)


def render_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Columns separated by two spaces, each as wide as its widest cell; the last column is not padded."""
    text_rows = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    lines = []
    for row in [list(headers), *text_rows]:
        padded = [value.ljust(widths[i]) for i, value in enumerate(row)]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]], stream: TextIO | None = None) -> None:
    print(render_table(headers, rows), file=stream or sys.stdout)


def print_json(document: object, stream: TextIO | None = None) -> None:
    print(json.dumps(document, indent=2), file=stream or sys.stdout)


class Progress:
    """A one-line bar on stderr, shown only when stderr is a terminal and there are many items.

    Scripts that capture stderr (or pipe it to a file) get no bar and no control characters.
    """

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool | None = None):
        self.total = total
        self.label = label
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = total >= PROGRESS_MIN_ITEMS and _is_terminal(self.stream)
        self.enabled = enabled
        self._drawn = False

    def start(self) -> Progress:
        self._draw()
        return self

    def advance(self, count: int = 1) -> None:
        self.done = min(self.total, self.done + count)
        self._draw()

    def finish(self) -> None:
        """Erase the bar so that what comes next starts on a clean line."""
        if self.enabled and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def _draw(self) -> None:
        if not self.enabled:
            return
        filled = BAR_WIDTH * self.done // self.total if self.total else BAR_WIDTH
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} partitions")
        self.stream.flush()
        self._drawn = True

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.finish()


class Elapsed:
    """`label, N s` on stderr, redrawn each second while one long step runs (a request whose answer is
    the only sign of progress), shown only when stderr is a terminal; erased when the step ends."""

    def __init__(self, label: str, *, stream: TextIO | None = None, enabled: bool = True):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and _is_terminal(self.stream)

    async def run(self, step: Awaitable[_T]) -> _T:
        if not self.enabled:
            return await step
        task = asyncio.ensure_future(step)
        started = time.monotonic()
        try:
            while not task.done():
                self.stream.write(f"\r{self.label}, {time.monotonic() - started:.0f} s")
                self.stream.flush()
                await asyncio.wait({task}, timeout=1.0)
        finally:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        return task.result()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
