"""Java's arithmetic, trimming and number parsing where Kafka's results depend on them: one owner for each rule."""

from __future__ import annotations

import math
import re

from protocol.varint import INT64_MAX, INT64_MIN


def java_round(value: float) -> int:
    """Java's Math.round of a double: halves go up, NaN is 0, and values past a long's range (an infinity, a
    quotient by a tiny quota) saturate at Long.MIN_VALUE and Long.MAX_VALUE."""
    if math.isnan(value):
        return 0
    if value >= INT64_MAX:
        return INT64_MAX
    if value <= INT64_MIN:
        return INT64_MIN
    return math.floor(value + 0.5)


_JAVA_BLANKS = "".join(map(chr, range(0x21)))  # what Java's String.trim drops: every char up to ' '


def java_trim(text: str) -> str:
    """Java's String.trim (Kafka trims values before parsing them, and Utils.isBlank uses it): control
    chars and spaces, no other Unicode blank (Python's strip() also drops a no-break space, which Java's
    parsers then refuse)."""
    return text.strip(_JAVA_BLANKS)


def java_int(text: str) -> int:
    """Java's Integer.parseInt / Long.parseLong, range aside: an optional sign and decimal digits (any
    script's, as Java's Character.digit), nothing else; Python's int() would also take '1_000' and
    surrounding blanks. ValueError otherwise."""
    if "_" in text or text != text.strip():
        raise ValueError(text)
    return int(text)


# Java's Double.parseDouble (the grammar of Double.valueOf): ASCII digits only, a decimal or hexadecimal
# (binary exponent required) numeral with an optional f/d suffix, or NaN / Infinity spelled so. Python's
# float() would also take 'inf', 'nan', '1_0' and other scripts' digits.
_JAVA_DOUBLE = re.compile(r"""[+-]?(?:
      NaN | Infinity
    | (?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?
    | (?P<hex>0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?
)""", re.VERBOSE)


def java_double(text: str) -> float:
    """Java's Double.parseDouble of an already trimmed value. ValueError otherwise."""
    match = _JAVA_DOUBLE.fullmatch(text)
    if match is None:
        raise ValueError(text)
    sign = "-" if text.startswith("-") else ""
    if match["hex"]:
        return float.fromhex(sign + match["hex"])
    return float(sign + match["dec"]) if match["dec"] else float(text.replace("Infinity", "inf"))
