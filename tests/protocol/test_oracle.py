"""Our codec against kafka-python 3's independent one, for every message and version both know.

1. Layout: at each version our spec puts the same fields on the wire, in the same order, with the
   same types, nullability, tags and defaults as Kafka's spec (kafka-python's copy).
2. Values: a message encoded by us decodes with kafka-python to equal values, kafka-python encodes
   the same message to identical bytes, and we decode its bytes back to our message.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage as KafkaPythonApiMessage

from protocol.messages import MESSAGES
from protocol.specs import FieldSpec, _build_message

from . import kafka_python_oracle as oracle
from .strategies import struct_of


def _default(f: FieldSpec):
    raw = f.default
    if raw is None or raw == "":
        return None
    if f.type in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(str(raw), 0)
    if f.type == "bool":
        return str(raw).lower() == "true"
    return str(raw)


def wire_signature(fields: list[FieldSpec], version: int, flexible: bool) -> list:
    out = []
    for f in fields:
        if version not in f.versions:
            continue
        compact = version in f.flexible_versions if f.flexible_versions is not None else flexible
        tagged = version in f.tagged_versions
        out.append((
            f.name, f.type, version in f.nullable_versions, tagged, f.tag if tagged else None, compact,
            _default(f), wire_signature(f.fields, version, flexible),
        ))
    return out


def _shared_cases():
    theirs = oracle.classes()
    cases = []
    for name, cls in sorted(MESSAGES.items()):
        if name not in theirs:
            continue
        their_versions = _build_message(oracle.raw_spec(name), name).valid_versions
        cases += [(name, v) for v in cls.valid_versions if v in their_versions]
    return cases


CASES = _shared_cases()
EBB_OWN_API_KEYS = 10000
IDS = [f"{n}-v{v}" for n, v in CASES]


def test_oracle_covers_what_we_serve():
    names = {n for n, _ in CASES}
    ours = {n for n in MESSAGES if MESSAGES[n].spec.type in ("request", "response")
            and (MESSAGES[n].spec.api_key or 0) < EBB_OWN_API_KEYS}  # Ebb's own APIs have no Kafka spec to hold against
    from .test_kafka_jar_specs import KAFKA_ONLY  # held against Kafka's own specs there instead
    assert ours - set(KAFKA_ONLY) <= names, f"kafka-python lacks {ours - names - set(KAFKA_ONLY)}"
    assert not set(KAFKA_ONLY) & names, "kafka-python knows these now: test them here"


# Field names kafka-python 3's copy spells as the KIP-966 draft did; Kafka 4.x's specs (which ours follow)
# renamed them. Names never reach the wire.
RENAMED = {"LastKnownElr": "LastKnownELR", "NextCursor": "NextTopicPartition"}


def _renamed(signature: list) -> list:
    return [(RENAMED.get(name, name), *rest[:-1], _renamed(rest[-1])) for name, *rest in signature]


@pytest.mark.parametrize("name, version", CASES, ids=IDS)
def test_same_wire_layout_as_kafka(name, version):
    ours = MESSAGES[name].spec
    theirs = _build_message(oracle.raw_spec(name), name)
    assert (version in ours.flexible_versions) == (version in theirs.flexible_versions)
    flexible = version in ours.flexible_versions
    assert wire_signature(ours.fields, version, flexible) == _renamed(wire_signature(theirs.fields, version, flexible))


@pytest.mark.parametrize("name, version", CASES, ids=IDS)
@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_values_cross_codecs(name, version, data):
    cls = MESSAGES[name]
    their_cls = oracle.classes()[name]
    fields = cls.spec.fields
    message = data.draw(struct_of(cls, version))
    ours = cls[version].encode(message)

    # ours -> theirs. kafka-python's generic decode, skipping per-class client quirks (its
    # ApiVersionsResponse reads any error reply as v0, which is a client policy, not the layout).
    if issubclass(their_cls, KafkaPythonApiMessage):
        decoded = KafkaPythonApiMessage.decode.__func__(their_cls, ours, version=version)
    else:
        decoded = their_cls.decode(ours, version=version, header=False)  # a data struct: no version prefix
    assert oracle.from_theirs_struct(decoded, fields, their_cls._struct, version) == oracle.ours_as_plain(
        message, fields, version)

    # theirs -> bytes -> ours
    theirs_obj = oracle.to_theirs_struct(message, fields, their_cls._struct, their_cls)
    extra = {} if issubclass(their_cls, KafkaPythonApiMessage) else {"header": False}
    their_bytes = bytes(theirs_obj.encode(version=version, **extra))
    assert their_bytes == ours
    assert cls[version].decode(their_bytes) == message
