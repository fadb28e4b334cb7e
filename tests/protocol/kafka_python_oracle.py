"""Access to kafka-python 3's independent codec and its copies of Kafka's specs, used as an oracle."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

import kafka.protocol
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer
from kafka.protocol.schemas import load_json

INT32_MIN = -(2**31)


def _subclasses(base):
    for sub in base.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@cache
def classes() -> dict[str, type]:
    """kafka-python's message classes by spec name (primary classes only, not version views)."""
    for mod in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" not in mod.name and "generate_stubs" not in mod.name:
            importlib.import_module(mod.name)
    found = {}
    for base in (ApiMessage, ApiData):
        for cls in _subclasses(base):
            if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
                found.setdefault(cls._json["name"], cls)
    return found


def raw_spec(name: str) -> dict:
    """kafka-python's unpatched JSON spec for a message (Kafka's own field layout)."""
    return load_json(name)


def their_fields(struct):
    return list(struct._fields or ())


def _data_class(their_field):
    """kafka-python creates nested data classes lazily; make one the way it does when missing."""
    if their_field.data_class is None:
        their_field.set_data_class(type(their_field.type_str, (DataContainer,), {"_struct": their_field}))
    return their_field.data_class


def to_theirs(value, our_field, their_field):
    """Convert one of our field values to what kafka-python's object wants."""
    if their_field._type_str == "bitfield":
        if value is None or value == INT32_MIN:
            return None
        unsigned = value & 0xFFFFFFFF
        return {bit for bit in range(32) if unsigned >> bit & 1}
    if our_field.is_struct:
        cls = _data_class(their_field)
        if value is None:
            return None
        if our_field.is_array:
            return [to_theirs_struct(v, our_field.fields, their_field, cls) for v in value]
        return to_theirs_struct(value, our_field.fields, their_field, cls)
    return value


def to_theirs_struct(obj, our_fields, their_struct, cls):
    kwargs = {}
    for ours, theirs in _pairs(our_fields, their_struct):
        kwargs[theirs.name] = to_theirs(getattr(obj, ours.attr), ours, theirs)
    return cls(**kwargs)


def from_theirs(value, our_field, their_field, version):
    """Convert a kafka-python field value into our representation."""
    if their_field._type_str == "bitfield":
        if value is None:
            return INT32_MIN
        unsigned = sum(1 << bit for bit in value)
        return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned
    if our_field.is_struct:
        if value is None:
            return None
        if our_field.is_array:
            return [from_theirs_struct(v, our_field.fields, their_field, version) for v in value]
        return from_theirs_struct(value, our_field.fields, their_field, version)
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def from_theirs_struct(obj, our_fields, their_struct, version) -> dict:
    """A kafka-python object as nested dicts of our names, limited to the fields on the wire."""
    return {
        ours.attr: from_theirs(getattr(obj, theirs.name), ours, theirs, version)
        for ours, theirs in _pairs(our_fields, their_struct)
        if version in ours.versions
    }


def ours_as_plain(obj, our_fields, version) -> dict:
    """Our object as nested dicts, limited to the fields on the wire at this version."""
    out = {}
    for f in our_fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.attr)
        if f.is_struct and value is not None:
            if f.is_array:
                value = [ours_as_plain(v, f.fields, version) for v in value]
            else:
                value = ours_as_plain(value, f.fields, version)
        out[f.attr] = value
    return out


def _pairs(our_fields, their_struct):
    """Our fields beside kafka-python's, by position. Fields only we have (in versions kafka-python
    does not know, e.g. DeleteRecords v3's LeaderLogStartOffset) pair with nothing and are left out."""
    theirs = their_fields(their_struct)
    if len(our_fields) > len(theirs):
        known = {t._json["name"] for t in theirs}
        our_fields = [f for f in our_fields if f.name in known]
    assert len(our_fields) == len(theirs)
    return zip(our_fields, theirs, strict=True)
