"""Codecs are compiled on first use (protocol/messages.py VersionView.codec), and a codec built that way
works exactly as one built fresh for the same message and version."""

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.messages import MESSAGES

from .strategies import struct_of

CASES = [(name, v) for name, cls in sorted(MESSAGES.items()) for v in cls.valid_versions]


def test_importing_the_messages_compiles_no_codec():
    # In a process of its own: this one has compiled many codecs by now.
    probe = ("import protocol.messages as m; "
             "print(sum(v._codec is not None for c in m.MESSAGES.values() for v in c._views.values()))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


@pytest.mark.parametrize("name, version", CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@settings(max_examples=5, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_codec_built_on_first_use_equals_a_fresh_one(name, version, data):
    cls = MESSAGES[name]
    view = cls[version]
    lazy = view.codec
    assert view.codec is lazy, "compiled once, then kept"
    assert (lazy.name, lazy.version) == (name, version)
    fresh = view._build_codec(version)
    assert fresh is not lazy
    message = data.draw(struct_of(cls, version))
    encoded = fresh.encode(message)
    assert view.encode(message) == encoded
    assert view.decode(encoded) == fresh.decode(encoded) == message
