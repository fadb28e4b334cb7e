"""Java's .properties format (java.util.Properties.load), read the same way by the broker
(server.properties) and the CLI (--command-config)."""

from __future__ import annotations


class PropertiesError(ValueError):
    """A properties file we cannot read or use; the message names the file, line or key."""


def parse_properties(text: str) -> dict[str, str]:
    """Java's Properties.load format: `key=value`, `key: value` or `key value`; `#`/`!` comments;
    a line ending in an odd number of backslashes continues on the next; \\t \\n \\r \\f \\uXXXX escapes."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split(line, number)
        if not key:
            raise PropertiesError(f"line {number}: a value without a property name")
        out[key] = value
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split(line: str, number: int) -> tuple[str, str]:
    pos = 0
    while pos < len(line):
        ch = line[pos]
        if ch == "\\":
            pos += 2
            continue
        if ch in "=: \t\f":
            break
        pos += 1
    key_raw, rest = line[:pos], line[pos:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key_raw, number), _unescape(rest, number)


def _unescape(text: str, number: int) -> str:
    out = []
    pos = 0
    while pos < len(text):
        ch = text[pos]
        if ch != "\\" or pos + 1 == len(text):
            out.append(ch)
            pos += 1
            continue
        nxt = text[pos + 1]
        if nxt == "u":
            digits = text[pos + 2:pos + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError(f"line {number}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            pos += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        pos += 2
    return "".join(out)
