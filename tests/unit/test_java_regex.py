"""broker/java_regex.py against Java: client metrics match regexes that Kafka 4.3.1 accepts and refuses
(each verdict read from Kafka's ClientMetricsConfigs.validate on JDK 17, `client_id=<regex>`; an item
with a ',' is split there first, one with an '=' has no single regex), and Java's own descriptions."""

import pytest

from broker.client_metrics_configs import ClientMetricsError, validate
from broker.java_regex import JavaRegexError, check_java_regex
from protocol.errors import ErrorCode

ACCEPTED = [
    '\\p{L}+', '\\p{Alpha}', '\\Qa.b\\E', '(?<n>a)\\k<n>', 'a(?i)b', '\\h', '\\R', '\\z', '\\x{41}', '\\e', '\\cA',
    '\\G', '\\X', '(?U)a', '[\\d-z]', '\\8', 'abc.*', '^apache-kafka-java$', '[0-9]+\\.[0-9]+', '(foo|bar)baz', '.*',
    '\\w+@\\w+', 'a|b|', 'a{2}{3}', '{2}', 'a{3}', 'a{5}?', 'a*+', 'a++', 'a?+', '(?>a)', '(?:a)', '(?i:a)',
    '(?-i:a)', '(?s:.)', '(?x)a b', '(?)', '(?-)', '(?<!a)b', '(?!a)b', '[a-z&&[^b]]', '[]a]', '[a&&]', '\\0101',
    '\\u0041', '\\uD83D\\uDE00', '\\N{DIGIT ONE}', '\\N{LATIN SMALL LETTER A}', '\\p{IsLatin}', '\\p{InBasicLatin}',
    '\\p{InBasic_Latin}', '\\p{IsAlphabetic}', '\\p{javaLowerCase}', '\\pL', '\\P{Lu}', '(?U)\\p{alpha}', '\\b{g}',
    '(?<a1>x)', '\\Q', '\\Q(\\E+', '\\_', '\\-', '\\é', '[[:alpha:]]', '\\Z', '\\b', '\\B', '\\A', '\\v', '\\V',
    '\\H', '(?<!a*)x', '(?x)a #comment', 'é+', '\\x{1F600}+', 'a\\\\',
    '(?<!(a)*)', '(?<!a*?(?:b|c)d*?)', '(?<!a{1073741824}(?:b|c)a{1073741824})', '(?<!(?:\\R){2})',
]
REFUSED = [
    '(?P<n>a)', '(?#c)a', '{foo}', 'x{', '\\U0001F600', '(?a)a', 'client-\\d{1,3}', '[', '[a-', '(', ')', 'a)', '*a',
    'a**', 'a{2,}', '(?L)a', '(?$)', '(?<!\\1)', '[]', '[^]', '[&&]', '[a-\\d]', '[z-a]', '[\\1]', '\\0', '\\08',
    '\\u00', '\\x4', '\\x{110000}', '\\x{}', '\\N{NOPE}', '\\p{isalpha}', '\\p{Lx}', '\\pX', '\\p{}', '\\p{L',
    '\\p{alpha}', '\\b{x}', '\\k<a>', '(?<1a>x)', '(?<a_b>x)', '(?<a>x)(?<a>y)', '\\E', '\\y', '\\g', '\\c',
    '(?(1)a|b)', 'a{2147483648}', '\\', '(?<!(?:ab)*)x',
]


@pytest.mark.parametrize("regex", ACCEPTED)
def test_kafka_accepts(regex):
    assert validate("s", {"match": f"client_id={regex}"}) == {"match": f"client_id={regex}"}


@pytest.mark.parametrize("regex", REFUSED)
def test_kafka_refuses(regex):
    with pytest.raises(ClientMetricsError) as refused:
        validate("s", {"match": f"client_id={regex}"})
    assert refused.value.error_code == ErrorCode.INVALID_CONFIG
    assert refused.value.message.startswith("Illegal client matching pattern: client_id=")


# Pattern.compile's description of the first problem (PatternSyntaxException.getDescription, JDK 17).
@pytest.mark.parametrize("regex, description", [
    ("a**", "Dangling meta character '*'"), ("x{", "Illegal repetition"), ("a{2147483648}", "Illegal repetition range"),
    ("a{3", "Unclosed counted closure"), ("(a", "Unclosed group"), ("a)", "Unmatched closing ')'"),
    ("[a", "Unclosed character class"), ("[z-a]", "Illegal character range"), ("[&&]", "Bad class syntax"),
    ("\\y", "Illegal/unsupported escape sequence"), ("(?L)", "Unknown inline modifier"), ("(?@)", "Unknown group type"),
    ("\\p{Lx}", "Unknown character property name {Lx}"), ("\\p{L", "Unclosed character family"),
    ("\\p{}", "Empty character family"), ("\\k<a>", "named capturing group <a> does not exist"),
    ("(?<a>x)(?<a>y)", "Named capturing group <a> is already defined"),
    ("(?<1>x)", "capturing group name does not start with a Latin letter"),
    ("(?<a_>x)", "named capturing group is missing trailing '>'"),
    ("(?<!\\1)", "Look-behind group does not have an obvious maximum length"),
    # Java's bound on a look-behind: a group it loops over, and its int arithmetic overflowing
    ("(?<!(?:a|bc){2})", "Look-behind group does not have an obvious maximum length"),
    ("(?<!(?:ab)*)", "Look-behind group does not have an obvious maximum length"),
    ("(?<!a{1073741824}a{1073741824})", "Look-behind group does not have an obvious maximum length"),
    ("(?<!ab{2,}?)", "Look-behind group does not have an obvious maximum length"),
    ("(?<!a(?:b){2,}", "Look-behind group does not have an obvious maximum length"),  # before the ')' is missed
    ("\\0", "Illegal octal escape sequence"), ("\\x{110000}", "Hexadecimal codepoint is too big"),
    ("\\x{41", "Unclosed hexadecimal escape sequence"), ("\\xg", "Illegal hexadecimal escape sequence"),
    ("\\u12", "Illegal Unicode escape sequence"), ("\\c", "Illegal control escape sequence"),
    ("\\N{NOPE}", "Unknown character name [NOPE]"), ("\\N", "Illegal character name escape sequence"),
    ("(?x) # comment\n*", "Dangling meta character '*'"),
])
def test_javas_descriptions(regex, description):
    with pytest.raises(JavaRegexError) as refused:
        check_java_regex(regex)
    assert str(refused.value) == description
