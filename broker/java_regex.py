"""Whether java.util.regex.Pattern.compile (Java 17, no flags) accepts a regular expression.

Kafka checks client metrics `match` regexes by compiling them; Ebb never runs them (it serves no
telemetry), so all it needs is Java's verdict. Python's `re` (and the `regex` package) are other
dialects: Java alone knows `\\p{Alpha}`, `\\Q..\\E`, `\\h`, `\\R`, `\\X`, `\\z`, `\\x{41}`, class
intersections (`[a-z&&[^b]]`) and flags mid-pattern (`a(?i)b`); Python alone `(?P<n>..)`, `(?#..)`,
`\\U0001F600`, `(?a)`, and it reads `{foo}` as a literal. So this module walks the pattern as Java's
parser does, step for step (the same reads, look-aheads and error checks, comments mode included),
building no matcher. JavaRegexError carries Java's description of the first problem.

It keeps, of each node, what Java's TreeInfo needs to bound a look-behind's longest match (Java
refuses a look-behind it cannot bound: a back reference, a group it must loop over, a length past
2^31 by its int arithmetic). Where it may still differ (docs/features.md): `\\N{name}` is looked up in
Python's Unicode database, not Java 17's.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from broker.java_math import java_trim
from broker.java_unicode_names import UNICODE_BLOCKS, UNICODE_SCRIPTS

# Inline flags (Pattern's bit values do not matter here, only which are set).
CASE_INSENSITIVE, UNIX_LINES, COMMENTS, UNICODE_CHARACTER_CLASS = 1, 2, 4, 8
_FLAG_LETTERS = {"i": CASE_INSENSITIVE, "m": 0, "s": 0, "d": UNIX_LINES, "u": 0, "c": 0, "x": COMMENTS,
                 "U": UNICODE_CHARACTER_CLASS}
MAX_CODE_POINT = 0x10FFFF

# \p{name}: Pattern's property names (case matters), then, for \p{Is<name>}, its Unicode binary
# properties and POSIX classes (upper-cased first); with (?U) the POSIX classes come before the names.
_PROPERTIES = frozenset(
    "Cn Lu Ll Lt Lm Lo Mn Me Mc Nd Nl No Zs Zl Zp Cc Cf Co Cs Pd Ps Pe Pc Po Sm Sc Sk So Pi Pf L M N Z C P S "
    "LC LD L1 all ASCII Alnum Alpha Blank Cntrl Digit Graph Lower Print Punct Space Upper XDigit javaLowerCase "
    "javaUpperCase javaAlphabetic javaIdeographic javaTitleCase javaDigit javaDefined javaLetter javaLetterOrDigit "
    "javaJavaIdentifierStart javaJavaIdentifierPart javaUnicodeIdentifierStart javaUnicodeIdentifierPart "
    "javaIdentifierIgnorable javaSpaceChar javaWhitespace javaISOControl javaMirrored".split())
_UNICODE_PROPERTIES = frozenset(
    "ALPHABETIC ASSIGNED CONTROL HEXDIGIT HEX_DIGIT IDEOGRAPHIC JOINCONTROL JOIN_CONTROL LETTER LOWERCASE "
    "NONCHARACTERCODEPOINT NONCHARACTER_CODE_POINT TITLECASE PUNCTUATION UPPERCASE WHITESPACE WHITE_SPACE WORD".split())
_POSIX = frozenset("ALPHA LOWER UPPER SPACE PUNCT XDIGIT ALNUM CNTRL DIGIT BLANK GRAPH PRINT".split())


# What the parser keeps of each node, for one check only: Java refuses a look-behind whose longest match
# its TreeInfo cannot bound. ("len", n): n chars; ("zero",): an anchor or look-around; ("chars", min): one
# char or class repeated greedily by * or + (Java adds 2^31-1, unchecked); ("curly", chain, min, max): a
# counted repeat (its length checked); ("ques", chain): optional; ("indep", chain): (?>..); ("loop",): a
# group Java repeats by looping (unbounded); ("branch", alternatives): alternation, the rest of the chain
# measured apart, as Java does; and the three below.
Node = tuple
Chain = list
_ONE, _ZERO = ("len", 1), ("zero",)
_BACK_REFERENCE, _LINE_ENDING, _GRAPHEME = ("backref",), ("R",), ("X",)
MAX_REPS = 2**31 - 1


@dataclass
class _TreeInfo:
    max_length: int = 0
    max_valid: bool = True
    deterministic: bool = True


def _study(chain: Chain, info: _TreeInfo | None = None) -> _TreeInfo:
    """Java's TreeInfo over a chain (int arithmetic, as Java's, wrapping): its longest match, whether
    that is bounded, whether the chain is deterministic."""
    info = _TreeInfo() if info is None else info
    for index, node in enumerate(chain):
        kind = node[0]
        if kind == "len":
            info.max_length = _int32(info.max_length + node[1])
        elif kind == "R":
            info.max_length = _int32(info.max_length + 2)
        elif kind == "X":
            info.deterministic = False
        elif kind == "backref":
            info.max_valid = False
        elif kind == "chars":
            if info.max_valid:
                info.max_length = _int32(info.max_length + MAX_REPS)
            info.deterministic = False
        elif kind == "curly":
            _, atom, low, high = node
            before = _TreeInfo(info.max_length, info.max_valid, info.deterministic)
            inner = _study(atom)
            info.max_length, info.max_valid = inner.max_length, inner.max_valid
            if before.max_valid and inner.max_valid:
                info.max_length = _int32(inner.max_length * high + before.max_length)
                info.max_valid = info.max_length >= before.max_length  # Java's overflow check
            else:
                info.max_valid = False
            info.deterministic = before.deterministic if inner.deterministic and low == high else False
        elif kind == "ques":
            _study(node[1], info)
            info.deterministic = False
        elif kind == "indep":
            _study(node[1], info)
        elif kind == "loop":
            info.max_valid = info.deterministic = False
            return info
        elif kind == "branch":
            longest, valid = -1, info.max_valid
            for alternative in node[1]:
                measured = _study(alternative)
                longest, valid = max(longest, measured.max_length), valid and measured.max_valid
            rest = _study(chain[index + 1:])
            info.max_length = _int32(rest.max_length + _int32(info.max_length + longest))
            info.max_valid, info.deterministic = rest.max_valid and valid, False
            return info
    return info


class JavaRegexError(ValueError):
    """What Pattern.compile's PatternSyntaxException would describe."""


def check_java_regex(pattern: str) -> None:
    """Returns when Java 17's Pattern.compile(pattern) accepts it; JavaRegexError otherwise."""
    _Parser(pattern).parse()


def _is_space(ch: int) -> bool:  # Java's ASCII.isSpace
    return ch in (0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D)


def _is_hex(ch: int) -> bool:
    return 0x30 <= ch <= 0x39 or 0x41 <= ch <= 0x46 or 0x61 <= ch <= 0x66


def _is_digit(ch: int) -> bool:
    return 0x30 <= ch <= 0x39


def _is_alpha(ch: int) -> bool:
    return 0x41 <= ch <= 0x5A or 0x61 <= ch <= 0x7A


def _int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def _without_quoting(text: list[int]) -> list[int]:
    """Java's first pass: each \\Q...\\E becomes escaped literals (a digit right after \\Q as \\x3<d>, so
    that it cannot extend an escape before it); other text is left alone."""
    i, n = 0, len(text)
    while i < n - 1:
        if text[i] != ord("\\"):
            i += 1
        elif text[i + 1] != ord("Q"):
            i += 2
        else:
            break
    if i >= n - 1:
        return text
    out = text[:i]
    i += 2
    in_quote = begin_quote = True
    while i < n:
        c = text[i]
        i += 1
        if c > 0x7F or _is_alpha(c):
            out.append(c)
        elif _is_digit(c):
            if begin_quote:
                out.extend(map(ord, "\\x3"))
            out.append(c)
        elif c != ord("\\"):
            if in_quote:
                out.append(ord("\\"))
            out.append(c)
        elif in_quote:
            if i < n and text[i] == ord("E"):
                i += 1
                in_quote = False
            else:
                out.extend((ord("\\"), ord("\\")))
        elif i < n and text[i] == ord("Q"):
            i += 1
            in_quote = begin_quote = True
            continue
        else:
            out.append(c)
            if i != n:
                out.append(text[i])
                i += 1
        begin_quote = False
    return out


class _Parser:
    """Pattern's recursive descent over code points, with its two 0 sentinels at the end. Methods
    return what Java's return where it matters to the checks: a literal's code point (>= 0) or -1."""

    def __init__(self, pattern: str) -> None:
        codes = _without_quoting([ord(c) for c in pattern])
        self.length = len(codes)
        self.temp = codes + [0, 0]
        self.cursor = 0
        self.flags = 0
        self.groups = 1  # Java counts group 0
        self.names: set[str] = set()
        self.escaped: Node = _ZERO  # what the last escape that is no literal stands for

    def error(self, description: str) -> JavaRegexError:
        return JavaRegexError(description)

    # --- reading, as Pattern's peek/read/next/skip (comments mode skips blanks and #-lines) ---
    def has(self, flag: int) -> bool:
        return bool(self.flags & flag)

    def _at(self, index: int) -> int:
        return self.temp[index] if index < len(self.temp) else 0

    def peek(self) -> int:
        ch = self._at(self.cursor)
        return self._peek_past_whitespace(ch) if self.has(COMMENTS) else ch

    def read(self) -> int:
        ch = self._at(self.cursor)
        self.cursor += 1
        return self._parse_past_whitespace(ch) if self.has(COMMENTS) else ch

    def next(self) -> int:
        self.cursor += 1
        ch = self._at(self.cursor)
        return self._peek_past_whitespace(ch) if self.has(COMMENTS) else ch

    def next_escaped(self) -> int:
        self.cursor += 1
        return self._at(self.cursor)

    def skip(self) -> int:
        ch = self._at(self.cursor + 1)
        self.cursor += 2
        return ch

    def unread(self) -> None:
        self.cursor -= 1

    def _line_separator(self, ch: int) -> bool:
        if self.has(UNIX_LINES):
            return ch == 0x0A
        return ch in (0x0A, 0x0D, 0x85, 0x2028, 0x2029) or (ch | 1) == 0x2029

    def _peek_past_whitespace(self, ch: int) -> int:
        while _is_space(ch) or ch == ord("#"):
            while _is_space(ch):
                self.cursor += 1
                ch = self._at(self.cursor)
            if ch == ord("#"):
                self.cursor += 1
                ch = self._at(self.cursor)
                while ch != 0 and not self._line_separator(ch):
                    self.cursor += 1
                    ch = self._at(self.cursor)
                if ch == 0 and self.cursor > self.length:
                    self.cursor = self.length
                    ch = self._at(self.cursor)
        return ch

    def _parse_past_whitespace(self, ch: int) -> int:
        while _is_space(ch) or ch == ord("#"):
            while _is_space(ch):
                ch = self._at(self.cursor)
                self.cursor += 1
            if ch == ord("#"):
                ch = self._at(self.cursor)
                self.cursor += 1
                while ch != 0 and not self._line_separator(ch):
                    ch = self._at(self.cursor)
                    self.cursor += 1
                if ch == 0 and self.cursor > self.length:
                    self.cursor = self.length
                    ch = self._at(self.cursor)
                    self.cursor += 1
        return ch

    def accept(self, expected: int, description: str) -> None:
        ch = self._at(self.cursor)
        self.cursor += 1
        if self.has(COMMENTS):
            ch = self._parse_past_whitespace(ch)
        if ch != expected:
            raise self.error(description)

    # --- structure ---
    def parse(self) -> None:
        self.expr()
        if self.cursor != self.length:
            raise self.error("Unmatched closing ')'" if self.peek() == ord(")") else "Unexpected internal error")

    # Each structural method returns the nodes it read as a chain, for _study (look-behinds).
    def expr(self) -> Chain:
        alternatives = []
        while True:
            alternatives.append(self.sequence())
            if self.peek() != ord("|"):
                return alternatives[0] if len(alternatives) == 1 else [("branch", alternatives)]
            self.next()

    def sequence(self) -> Chain:
        chain: Chain = []
        while True:
            ch = self.peek()
            single = True  # one char, class or property: what Java repeats greedily without a loop
            if ch == ord("("):
                chain.extend(self.group0())  # a group reads its own quantifier; flags alone: nothing
                continue
            if ch == ord("["):
                self.clazz(True)
                nodes: Chain = [_ONE]
            elif ch == ord("\\"):
                ch = self.next_escaped()
                if ch in (ord("p"), ord("P")):
                    self.property()
                    nodes = [_ONE]
                else:
                    self.unread()
                    nodes, single = self.atom()
            elif ch in (ord("^"), ord("$"), ord(".")):
                self.next()
                nodes, single = ([_ONE], True) if ch == ord(".") else ([_ZERO], False)
            elif ch in (ord("|"), ord(")")):
                return chain
            elif ch in (ord("?"), ord("*"), ord("+")):
                self.next()
                raise self.error(f"Dangling meta character '{chr(ch)}'")
            elif ch == 0 and self.cursor >= self.length:
                return chain
            else:
                nodes, single = self.atom()
            chain.extend(self.closure(nodes, single))

    def atom(self) -> tuple[Chain, bool]:
        """A run of literal chars, or one escape that is not one; the nodes, and whether they are one
        char or class."""
        first, prev = 0, -1
        ch = self.peek()
        while True:
            if ch in (ord("*"), ord("+"), ord("?"), ord("{")):
                if first > 1:
                    self.cursor = prev
                    first -= 1
                break
            if ch in (ord("$"), ord("."), ord("^"), ord("("), ord("["), ord("|"), ord(")")):
                break
            if ch == ord("\\"):
                ch = self.next_escaped()
                if ch in (ord("p"), ord("P")):
                    if first > 0:
                        self.unread()
                        break
                    self.property()
                    return [_ONE], True
                self.unread()
                prev = self.cursor
                ch = self.escape(False)
                if ch >= 0:
                    first += 1
                    ch = self.peek()
                    continue
                if first == 0:
                    return [self.escaped], self.escaped is _ONE
                self.cursor = prev  # a meta escape ends the literal run; it is read again on its own
                break
            if ch == 0 and self.cursor >= self.length:
                break
            prev = self.cursor
            first += 1
            ch = self.next()
        return [("len", first)], first == 1

    def quantifier(self) -> tuple[str, int, int, str] | None:
        """The quantifier that follows, if any: ("?", "*", "+", "{" or "{," when open-ended), min, max,
        and "greedy", "lazy" or "possessive"."""
        ch = self.peek()
        if ch in (ord("?"), ord("*"), ord("+")):
            kind, low = chr(ch), 1 if ch == ord("+") else 0
            high = 1 if ch == ord("?") else MAX_REPS
        elif ch == ord("{"):
            ch = self._at(self.cursor + 1)
            if not _is_digit(ch):
                raise self.error("Illegal repetition")
            self.skip()
            low = 0
            while True:
                low = _int32(low * 10 + (ch - 0x30))
                ch = self.read()
                if not _is_digit(ch):
                    break
            high = low
            kind = "{"
            if ch == ord(","):
                ch = self.read()
                high, kind = MAX_REPS, "{,"  # open-ended: repeated as * and + are
                if ch != ord("}"):
                    kind = "{"
                    high = 0
                    while _is_digit(ch):
                        high = _int32(high * 10 + (ch - 0x30))
                        ch = self.read()
            if ch != ord("}"):
                raise self.error("Unclosed counted closure")
            if (low | high | _int32(high - low)) < 0:
                raise self.error("Illegal repetition range")
            self.unread()  # the closing brace is consumed below, as '?', '*' and '+' are
        else:
            return None
        ch = self.next()
        mode = {ord("?"): "lazy", ord("+"): "possessive"}.get(ch, "greedy")
        if mode != "greedy":
            self.next()
        return kind, low, high, mode

    def closure(self, nodes: Chain, single: bool) -> Chain:
        """`nodes` under the quantifier that follows, as Java builds them."""
        quantified = self.quantifier()
        if quantified is None:
            return nodes
        kind, low, high, mode = quantified
        if kind == "?":
            return [("ques", nodes)]
        if kind in ("*", "+", "{,") and mode == "greedy" and single:
            return [("chars", low)]
        return [("curly", nodes, low, high)]

    def group0(self) -> Chain:
        """A group, under its quantifier; nothing for flags alone, `(?i)`, which stay set to the end of
        the enclosing group."""
        saved = self.flags
        ch = self.next()
        grouping = True  # a capturing or plain group; look-arounds and (?>..) are single nodes
        if ch == ord("?"):
            ch = self.skip()
            if ch == ord(":"):
                body = self.expr()
            elif ch == ord(">"):
                body, grouping = [("indep", self.expr())], False
            elif ch in (ord("="), ord("!")):
                self.expr()
                body, grouping = [_ZERO], False
            elif ch == ord("<"):
                ch = self.read()
                if ch not in (ord("="), ord("!")):
                    name = self.group_name(ch)
                    if name in self.names:
                        raise self.error(f"Named capturing group <{name}> is already defined")
                    self.groups += 1
                    self.names.add(name)
                    body = self.expr()
                else:
                    if not _study(self.expr()).max_valid:
                        raise self.error("Look-behind group does not have an obvious maximum length")
                    body, grouping = [_ZERO], False
            elif ch in (ord("$"), ord("@")):
                raise self.error("Unknown group type")
            else:
                self.unread()
                self.add_flags()
                ch = self.read()
                if ch == ord(")"):
                    return []
                if ch != ord(":"):
                    raise self.error("Unknown inline modifier")
                body = self.expr()
        else:
            self.groups += 1
            body = self.expr()
        self.accept(ord(")"), "Unclosed group")
        self.flags = saved
        if not grouping:
            return self.closure(body, False)
        quantified = self.quantifier()
        if quantified is None:
            return body
        kind, low, high, mode = quantified
        if mode == "possessive":
            return [("ques", body)] if kind == "?" else [("curly", body, low, high)]
        if kind == "?":
            return [("branch", [body, []])]
        # a group Java can repeat as one piece (deterministic) is bounded; else it loops, unbounded
        return [("curly", body, low, high)] if _study(body).deterministic else [("loop",)]

    def add_flags(self) -> None:
        ch = self.peek()
        on = True
        while True:
            letter = chr(ch)
            if letter in _FLAG_LETTERS:
                if on:
                    self.flags |= _FLAG_LETTERS[letter]
                else:
                    self.flags &= ~_FLAG_LETTERS[letter]
            elif letter == "-" and on:
                on = False
            else:
                return
            ch = self.next()

    def group_name(self, ch: int) -> str:
        if not _is_alpha(ch):
            raise self.error("capturing group name does not start with a Latin letter")
        name = []
        while True:
            name.append(chr(ch))
            ch = self.read()
            if not (_is_alpha(ch) or _is_digit(ch)):
                break
        if ch != ord(">"):
            raise self.error("named capturing group is missing trailing '>'")
        return "".join(name)

    # --- character classes ---
    def clazz(self, consume: bool) -> None:
        have_prev = have_bits = False
        ch = self.next()
        if ch == ord("^") and self._at(self.cursor - 1) == ord("["):
            ch = self.next()
        while True:
            if ch == ord("["):
                self.clazz(True)
                have_prev = True
                ch = self.peek()
                continue
            if ch == ord("&"):
                ch = self.next()
                if ch == ord("&"):
                    ch = self.next()
                    right = False
                    while ch not in (ord("]"), ord("&")):
                        if ch == ord("["):
                            self.clazz(True)
                        else:  # abc&&def
                            self.unread()
                            self.clazz(False)
                        right = True
                        ch = self.peek()
                    if not (have_prev or have_bits or right):
                        raise self.error("Bad class syntax")
                    have_prev, have_bits = True, False  # the chars so far joined the intersection
                    continue
                self.unread()  # a literal '&'
            elif ch == 0 and self.cursor >= self.length:
                raise self.error("Unclosed character class")
            elif ch == ord("]") and (have_prev or have_bits):
                if consume:
                    self.next()
                return
            if self.range():
                have_bits = True
            else:
                have_prev = True
            ch = self.peek()

    def range(self) -> bool:
        """One item of a class; True when it is a single char or a range (Java's bits), False for a
        property or class escape."""
        ch = self.peek()
        if ch == ord("\\"):
            ch = self.next_escaped()
            if ch in (ord("p"), ord("P")):
                self.property()
                return False
            is_range = self._at(self.cursor + 1) == ord("-")
            self.unread()
            ch = self.escape(True, is_range)
            if ch == -1:
                return False
        else:
            self.next()
        if self.peek() == ord("-"):
            end = self._at(self.cursor + 1)
            if end != ord("[") and end != ord("]"):
                self.next()
                m = self.peek()
                if m == ord("\\"):
                    m = self.escape(True, True)
                else:
                    self.next()
                if m < ch:
                    raise self.error("Illegal character range")
        return True

    def property(self) -> None:
        """After \\p or \\P: a one-letter name, or one in braces."""
        if self.next() != ord("{"):
            self.unread()
            self.family(True)
        else:
            self.family(False)

    def family(self, single_letter: bool) -> None:
        self.next()
        if single_letter:
            name = chr(self._at(self.cursor))
            self.read()
        else:
            start = self.cursor
            while self._at(self.cursor) != ord("}") and self.cursor < self.length:  # Java marks '}' at the end
                self.cursor += 1
            self.cursor += 1
            if self.cursor > self.length:
                raise self.error("Unclosed character family")
            if start + 1 >= self.cursor:
                raise self.error("Empty character family")
            name = "".join(map(chr, self.temp[start:self.cursor - 1]))
        if "=" in name:
            key, value = name.split("=", 1)
            key = key.lower()
            known = (value.upper() in UNICODE_SCRIPTS if key in ("sc", "script")
                     else value.upper() in UNICODE_BLOCKS if key in ("blk", "block")
                     else value in _PROPERTIES if key in ("gc", "general_category") else False)
            if not known:
                raise self.error(f"Unknown Unicode property {{name=<{key}>, value=<{value}>}}")
            return
        if name.startswith("In"):
            known = name[2:].upper() in UNICODE_BLOCKS
        elif name.startswith("Is"):
            short = name[2:]
            known = (short.upper() in _UNICODE_PROPERTIES or short.upper() in _POSIX or short in _PROPERTIES
                     or short.upper() in UNICODE_SCRIPTS)
        else:
            known = (self.has(UNICODE_CHARACTER_CLASS) and name.upper() in _POSIX) or name in _PROPERTIES
        if not known:
            raise self.error(f"Unknown character property name {{{name}}}")

    # --- escapes ---
    def escape(self, in_class: bool, is_range: bool = False) -> int:
        """The char after a backslash: a literal's code point, or -1 for anything else (a class, an
        anchor, a back reference)."""
        ch = self.skip()
        c = chr(ch)
        if c == "0":
            return self.octal()
        if c in "123456789":
            if in_class:
                raise self.error("Illegal/unsupported escape sequence")
            self.back_reference(ch - 0x30)
            return -1
        if c in "ABGRXZz":  # anchors and \R, \X: not in a class
            if in_class:
                raise self.error("Illegal/unsupported escape sequence")
            self.escaped = {"R": _LINE_ENDING, "X": _GRAPHEME}.get(c, _ZERO)
            return -1
        if c == "b":
            if in_class:
                raise self.error("Illegal/unsupported escape sequence")
            self.escaped = _ZERO
            if self.peek() == ord("{"):
                if self.skip() == ord("g"):
                    if self.read() == ord("}"):
                        return -1
                    raise self.error("Illegal/unsupported escape sequence")
                self.unread()
                self.unread()
            return -1
        if c in "DHSVWdhsw":
            self.escaped = _ONE
            return -1
        if c == "v":
            self.escaped = _ONE
            return 0x0B if is_range else -1
        if c == "k":
            if in_class:
                raise self.error("Illegal/unsupported escape sequence")
            if self.read() != ord("<"):
                raise self.error("\\k is not followed by '<' for named capturing group")
            name = self.group_name(self.read())
            if name not in self.names:
                raise self.error(f"named capturing group <{name}> does not exist")
            self.escaped = _BACK_REFERENCE
            return -1
        simple = {"a": 0x07, "e": 0x1B, "f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09}
        if c in simple:
            return simple[c]
        if c == "c":
            if self.cursor < self.length:
                return self.read() ^ 64
            raise self.error("Illegal control escape sequence")
        if c == "u":
            return self.unicode_escape()
        if c == "x":
            return self.hex_escape()
        if c == "N":
            return self.named_char()
        if _is_alpha(ch):
            raise self.error("Illegal/unsupported escape sequence")
        return ch

    def back_reference(self, number: int) -> None:
        """\\<n>: more digits are taken while they name a group that exists; never an error."""
        while _is_digit(self.peek()):
            longer = number * 10 + (self.peek() - 0x30)
            if self.groups - 1 < longer:
                break
            number = longer
            self.read()
        self.escaped = _BACK_REFERENCE

    def octal(self) -> int:
        n = self.read()
        if 0x30 <= n <= 0x37:
            m = self.read()
            if 0x30 <= m <= 0x37:
                o = self.read()
                if 0x30 <= o <= 0x37 and n <= 0x33:
                    return (n - 0x30) * 64 + (m - 0x30) * 8 + (o - 0x30)
                self.unread()
                return (n - 0x30) * 8 + (m - 0x30)
            self.unread()
            return n - 0x30
        raise self.error("Illegal octal escape sequence")

    def hex_escape(self) -> int:
        n = self.read()
        if _is_hex(n):
            m = self.read()
            if _is_hex(m):
                return int(chr(n) + chr(m), 16)
        elif n == ord("{") and _is_hex(self.peek()):
            value = 0
            while _is_hex(n := self.read()):
                value = value * 16 + int(chr(n), 16)
                if value > MAX_CODE_POINT:
                    raise self.error("Hexadecimal codepoint is too big")
            if n != ord("}"):
                raise self.error("Unclosed hexadecimal escape sequence")
            return value
        raise self.error("Illegal hexadecimal escape sequence")

    def unicode_escape(self) -> int:
        n = self._four_hex()
        if 0xD800 <= n <= 0xDBFF:
            saved = self.cursor
            if self.read() == ord("\\") and self.read() == ord("u"):
                low = self._four_hex()
                if 0xDC00 <= low <= 0xDFFF:
                    return 0x10000 + ((n - 0xD800) << 10) + (low - 0xDC00)
            self.cursor = saved
        return n

    def _four_hex(self) -> int:
        value = 0
        for _ in range(4):
            ch = self.read()
            if not _is_hex(ch):
                raise self.error("Illegal Unicode escape sequence")
            value = value * 16 + int(chr(ch), 16)
        return value

    def named_char(self) -> int:
        if self.read() != ord("{"):
            raise self.error("Illegal character name escape sequence")
        start = self.cursor
        while self.read() != ord("}"):
            if self.cursor >= self.length:
                raise self.error("Unclosed character name escape sequence")
        name = "".join(map(chr, self.temp[start:self.cursor - 1]))
        try:
            found = unicodedata.lookup(java_trim(name))
        except KeyError:
            found = ""
        if len(found) != 1:  # Python also knows named sequences; Java names single code points
            raise self.error(f"Unknown character name [{name}]")
        return ord(found)
