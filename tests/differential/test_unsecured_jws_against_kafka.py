"""Kafka's own OAuthBearerUnsecuredJws and validation rules (run in a JVM by ebb.interop.UnsecuredJwsJudge)
against Ebb's `validate`, on a seeded corpus of tokens built from pieces that probe what the readers may
disagree on: JSON edge cases (scalars at the top and what follows them, NaN, huge and long numbers,
surrogates, control characters, bytes after the value), Java's blank and trim, claim types, scope lists.
Every token gets one verdict from each: accepted with the same principal, insufficient_scope, invalid_token,
or a failure without a challenge."""

from __future__ import annotations

import base64
import random
import subprocess

import pytest

from broker.security.errors import AuthenticationFailed
from broker.security.oauthbearer import UnsecuredValidator, _Rejected, validate
from tests.interop.conftest import TARGET, build

pytestmark = pytest.mark.timeout(300)
NOW_MS = 1_800_000_000_000
STRINGS = ['"a"', '" a "', '"\\u00a0"', '"\\u0001"', '"\\u2003b"', '"\\ud800"', '"\\ud83d\\ude00"', '"x\\ty"',
           '""', '"\\u001f"', '"a\\u00a0"', '1', 'true', 'null', '[]', '{}', '["a"]', '[" a", 1]',
           '["\\u0001a\\u0000"]', '"\u00e9"']
NUMBERS = ['2000000000', '1800000000', '1799999999.9995', '1800000000.0001', '1e999', '-1e999', '1' + '0' * 400,
           '1' + '0' * 1000, '2e9', '1800000000000e-3', '"2000000000"', 'true', '1E10', '-0', 'NaN', 'Infinity']
TAILS = ['', ' ', 'x', '}', ' {', '\f', ']', '\x00', ' trailing']
HEADERS = ['{"alg":"none"}', ' {"alg":"none"} x', '{"alg":"none","alg":"x"}', '{"alg":null}', '{"alg":1}', '"none"',
           '1 ', '1x', 'true', 'truex', 'true]', 'null}', 'nulla', 'false\u00e9', '{"alg":"none"}\f', '']
ATOMS = ['{', '}', '[', ']', ',', ':', '"sub"', '"exp"', '"iat"', '"scope"', '"a"', '" a "', '1', '-1', '1e999',
         '1' + '0' * 400, '2000000000', 'NaN', 'Infinity', 'true', 'null', '"\\ud800"', '"\\u0001"', ' ', '\f', '"x',
         '\\', '0.5', '-0', '1e-999', '"\x01"', '\u00e9', '"\\n"']


def section(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).decode().rstrip("=")


def corpus(seed: int, count: int) -> list[str]:
    """Half well-formed claim sets with chosen members, half soup of JSON pieces."""
    rnd = random.Random(seed)
    tokens = []
    for _ in range(count):
        if rnd.random() < 0.5:
            members = [f'"sub":{rnd.choice(STRINGS)}', f'"exp":{rnd.choice(NUMBERS)}']
            if rnd.random() < 0.6:
                members.append(f'"scope":{rnd.choice(STRINGS)}')
            if rnd.random() < 0.4:
                members.append(f'"iat":{rnd.choice(NUMBERS)}')
            rnd.shuffle(members)
            claims = "{" + ",".join(members) + "}" + rnd.choice(TAILS)
            header = rnd.choice(HEADERS)
        else:
            claims = "".join(rnd.choice(ATOMS) for _ in range(rnd.randint(0, 12)))
            header = rnd.choice(HEADERS[:3] + ["".join(rnd.choice(ATOMS) for _ in range(rnd.randint(0, 6)))])
        tokens.append(f"{section(header)}.{section(claims)}.")
    return tokens


def kafka_verdicts(tokens: list[str], required: tuple[str, ...]) -> list[str]:
    build()
    result = subprocess.run(
        ["java", "-cp", f"{TARGET / 'classes'}:{TARGET / 'lib'}/*", "ebb.interop.UnsecuredJwsJudge",
         str(NOW_MS), *required], input="\n".join(tokens) + "\n", capture_output=True, encoding="utf-8", timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


def ebb_verdict(token: str, validator: UnsecuredValidator) -> str:
    try:
        principal = validate(token, validator, NOW_MS)
    except _Rejected as rejected:
        return "SCOPE" if rejected.scope is not None else "REJ"
    except AuthenticationFailed:
        return "FAIL"
    return "OK " + principal.replace("\r", "~").replace("\n", "~")


@pytest.mark.parametrize("required", [(), ("a",)])
def test_unsecured_tokens_as_kafkas_own_classes_judge_them(required):
    tokens = corpus(seed=4301, count=20_000)
    theirs = kafka_verdicts(tokens, required)
    assert len(theirs) == len(tokens)
    ours = [ebb_verdict(token, UnsecuredValidator(required_scope=required)) for token in tokens]
    differ = [(token, k, e) for token, k, e in zip(tokens, theirs, ours, strict=True) if k != e]
    kinds = {verdict.split(" ")[0] for verdict in theirs}
    assert kinds == ({"OK", "SCOPE", "REJ", "FAIL"} if required else {"OK", "REJ", "FAIL"})  # every verdict reached
    assert not differ, f"{len(differ)} of {len(tokens)} differ, e.g. (token, Kafka, Ebb): {differ[:5]}"
