"""Every message at every version survives encode -> decode unchanged (values from hypothesis)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.messages import MESSAGES

from .strategies import struct_of

CASES = [(name, v) for name, cls in sorted(MESSAGES.items()) for v in cls.valid_versions]


@pytest.mark.parametrize("name, version", CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(name, version, data):
    cls = MESSAGES[name]
    message = data.draw(struct_of(cls, version))
    encoded = cls[version].encode(message)
    decoded = cls[version].decode(encoded)
    assert decoded == message
    assert cls[version].encode(decoded) == encoded
