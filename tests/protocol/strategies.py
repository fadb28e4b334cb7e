"""Hypothesis strategies that build random message objects from our specs, version by version."""

from __future__ import annotations

from hypothesis import strategies as st

from protocol.codec import default_value
from protocol.messages import Struct
from protocol.specs import FieldSpec

_INTS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
}


def _element(f: FieldSpec, cls: type | None, version: int) -> st.SearchStrategy:
    t = f.element_type
    if f.is_struct:
        return struct_of(cls, version)
    if t in _INTS:
        low, high = _INTS[t]
        return st.integers(low, high)
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "uuid":
        return st.uuids()
    if t == "string":
        return st.text(max_size=12)
    return st.binary(max_size=24)  # bytes and records


def field_values(f: FieldSpec, cls: type | None, version: int) -> st.SearchStrategy:
    if version not in f.versions:
        return st.just(default_value(f, cls))
    value = _element(f, cls, version)
    if f.is_array:
        value = st.lists(value, max_size=3)
    if version in f.nullable_versions:
        value = st.one_of(st.none(), value)
    return value


def struct_of(cls: type[Struct], version: int) -> st.SearchStrategy:
    nested = {name: getattr(cls, name) for name in dir(cls) if isinstance(getattr(cls, name), type)}
    kwargs = {
        f.attr: field_values(f, nested.get(f.element_type) if f.is_struct else None, version)
        for f in cls._specs
    }
    return st.builds(cls, **kwargs)
