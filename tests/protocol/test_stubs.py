"""The committed type stubs of the message classes (protocol/_messages.pyi) match the specs."""

from protocol import stubs
from protocol.messages import MESSAGES


def test_committed_stubs_are_what_the_generator_writes_now():
    committed = stubs.STUB_PATH.read_text()
    assert committed == stubs.render(), "protocol/_messages.pyi is out of date: run python -m protocol.stubs"


def test_every_message_class_has_a_stub():
    text = stubs.STUB_PATH.read_text()
    missing = [name for name in MESSAGES if f"\nclass {name}(ApiMessage):" not in text]
    assert missing == []
