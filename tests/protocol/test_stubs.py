"""The committed type stubs of the message classes (protocol/_messages.pyi) match the specs."""

import uuid

from protocol import stubs
from protocol.messages import MESSAGES, Struct


def test_committed_stubs_are_what_the_generator_writes_now():
    committed = stubs.STUB_PATH.read_text()
    assert committed == stubs.render(), "protocol/_messages.pyi is out of date: run python -m protocol.stubs"


def test_every_message_class_has_a_stub():
    text = stubs.STUB_PATH.read_text()
    missing = [name for name in MESSAGES if f"\nclass {name}(" not in text]
    assert missing == []


_PYTHON_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "bytes": bytes, "UUID": uuid.UUID,
                 "RecordData": (bytes, bytearray, memoryview)}


def _check_defaults(cls: type[Struct], where: str) -> list[str]:
    """Every field of a fresh instance holds a value of the type its stub names."""
    problems = []
    instance = cls()
    for f in cls._specs:
        value = getattr(instance, f.attr)
        if value is None:
            if f.nullable_versions.empty:
                problems.append(f"{where}.{f.attr}: None, typed {stubs.field_type(f)}")
            continue
        if f.is_array:
            ok = isinstance(value, list)
        elif f.is_struct:
            ok = isinstance(value, getattr(cls, f.element_type))
        else:
            expected = _PYTHON_TYPES[stubs.field_type(f).removesuffix(" | None")]
            ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
        if not ok:
            problems.append(f"{where}.{f.attr}: {value!r}, typed {stubs.field_type(f)}")
        if f.is_struct:
            problems += _check_defaults(getattr(cls, f.element_type), f"{where}.{f.element_type}")
    return problems


def test_default_values_have_the_stubbed_types():
    problems = [p for name, cls in sorted(MESSAGES.items()) for p in _check_defaults(cls, name)]
    assert problems == []
