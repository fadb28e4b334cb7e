"""The one JAAS entry a `sasl.jaas.config` property holds, as Kafka reads it:

    <LoginModuleClass> <required|requisite|sufficient|optional> key="value" key2=value2 ... ;

Values may be double-quoted (with backslash escapes) or bare words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)
FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    pass


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas_config(text: str) -> JaasEntry:
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[-1] != (";", False):
        raise JaasError("expected '<LoginModule> <flag> key=value ... ;'")
    (module, _), (flag, _) = tokens[0], tokens[1]
    if flag not in FLAGS:
        raise JaasError(f"login module flag {flag!r} is not one of {', '.join(FLAGS)}")
    body = tokens[2:-1]
    if len(body) % 3:
        raise JaasError("options must be key=value pairs")
    options: dict[str, str] = {}
    for i in range(0, len(body), 3):
        (key, quoted), (eq, _), (value, _) = body[i], body[i + 1], body[i + 2]
        if quoted or eq != "=" or value in ("=", ";"):
            raise JaasError(f"option near {key!r} is not key=value")
        options[key] = value
    return JaasEntry(module, flag, options)


def _tokens(text: str) -> list[tuple[str, bool]]:
    tokens, position, text = [], 0, text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise JaasError(f"unexpected text at {text[position:position + 20]!r}")
        quoted, word, eq, semi = match.groups()
        if quoted is not None:
            tokens.append((re.sub(r"\\(.)", r"\1", quoted), True))
        else:
            tokens.append((word or eq or semi, False))
        position = match.end()
    return tokens
