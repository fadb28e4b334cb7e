"""The broker (`python -m broker`, same arguments) with a bytecode counter for bench.opcodes.

Counting starts at SIGUSR1, after start-up, and covers the event loop's thread; at exit the counts
(Python opcodes executed and calls made, per function) go to the JSON file named by
$EBB_OPCODES_OUT; with $EBB_OPCODES_LINES set, opcodes are counted per line too (under
"lines"). Tracing every opcode makes the broker many times slower: the counts, not its
speed, are the figure.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import signal
import sys
from types import FrameType
from typing import Any

_opcodes: dict[str, int] = {}
_calls: dict[str, int] = {}
_lines: dict[str, int] = {}
_BY_LINE = bool(os.environ.get("EBB_OPCODES_LINES"))


def _name(frame: FrameType) -> str:
    code = frame.f_code
    return f"{code.co_qualname} ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})"


def _count(frame: FrameType, event: str, arg: Any) -> Any:
    frame.f_trace_opcodes = True
    if event == "opcode":
        key = _name(frame)
        _opcodes[key] = _opcodes.get(key, 0) + 1
        if _BY_LINE:
            line = f"{key} line {frame.f_lineno}"
            _lines[line] = _lines.get(line, 0) + 1
    elif event == "call":
        key = _name(frame)
        _calls[key] = _calls.get(key, 0) + 1
    return _count


def _start(signum: int, frame: FrameType | None) -> None:
    sys.settrace(_count)  # frames made from now on
    while frame is not None:  # and the ones running now (the event loop's)
        frame.f_trace = _count
        frame = frame.f_back


def _dump() -> None:
    sys.settrace(None)
    with open(os.environ["EBB_OPCODES_OUT"], "w") as out:
        json.dump({"opcodes": _opcodes, "calls": _calls, "lines": _lines}, out)


if __name__ == "__main__":
    atexit.register(_dump)
    signal.signal(signal.SIGUSR1, _start)
    sys.argv = ["broker", *sys.argv[1:]]
    runpy.run_module("broker", run_name="__main__", alter_sys=True)
