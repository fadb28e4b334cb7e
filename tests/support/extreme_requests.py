"""Well-formed requests with extreme values, for every API and version a broker advertises.

Each request is a valid encoding of its spec: integers at their bounds (and -1, 0, 1), strings empty,
short, or as long as the version can carry (32,767 bytes in a non-flexible version, far more in a
flexible one), arrays empty or of a few elements, nullable fields null. A fixed seed makes a corpus
replay. What a broker must do with each: answer it (an error code where the values make no sense),
never raise inside a handler, never fail to encode its answer.
"""

from __future__ import annotations

import random
import uuid

from protocol.codec import default_value
from protocol.framing import encode_request
from protocol.messages import APIS, Struct
from protocol.specs import FieldSpec

_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
}
SHORT_STRING_MAX = 32767  # int16 length prefix
LONG_STRING = 200_000  # what a compact string carries without trouble
# Creating partitions is bounded by resources, not parsing: counts there stay small (bench/scale.py).
SMALL_COUNT_FIELDS = {"num_partitions", "count", "replication_factor"}


class ExtremeValues:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, kind: str, attr: str) -> int:
        low, high = _BOUNDS[kind]
        if attr in SMALL_COUNT_FIELDS:
            return self.rng.choice([-1, 0, 1, 3])
        return self.rng.choice([low, high, -1, 0, 1, self.rng.randint(low, high)])

    def string(self, flexible: bool) -> str:
        longest = LONG_STRING if flexible else SHORT_STRING_MAX
        choice = self.rng.randrange(5)
        if choice == 0:
            return ""
        if choice == 1:
            return "x" * longest
        if choice == 2:
            return "é" * (SHORT_STRING_MAX // 2)  # two bytes each: exactly at the int16 limit
        return self.rng.choice(["t", "group", "a.b-c_d", "__consumer_offsets", "..", "with space"])

    def value(self, f: FieldSpec, cls: type | None, version: int, flexible: bool):
        if version not in f.versions:
            return default_value(f, cls)
        if version in f.nullable_versions and self.rng.random() < 0.15:
            return None
        if f.is_array:
            return [self.element(f, cls, version, flexible) for _ in range(self.rng.choice([0, 1, 1, 2, 3]))]
        return self.element(f, cls, version, flexible)

    def element(self, f: FieldSpec, cls: type | None, version: int, flexible: bool):
        kind = f.element_type
        if f.is_struct:
            return self.struct(cls, version, flexible)
        if kind in _BOUNDS:
            return self.integer(kind, f.attr)
        if kind == "bool":
            return self.rng.random() < 0.5
        if kind == "float64":
            return self.rng.choice([0.0, -1.0, 1e308, float("inf")])
        if kind == "uuid":
            return self.rng.choice([uuid.UUID(int=0), uuid.uuid4()])
        if kind == "string":
            return self.string(flexible)
        return self.rng.randbytes(self.rng.choice([0, 1, 61, 200]))  # bytes and records

    def struct(self, cls: type[Struct], version: int, flexible: bool) -> Struct:
        nested = {name: getattr(cls, name) for name in dir(cls) if isinstance(getattr(cls, name), type)}
        return cls(**{f.attr: self.value(f, nested.get(f.element_type) if f.is_struct else None, version, flexible)
                      for f in cls._specs})


def extreme_frames(advertised: dict[int, tuple[int, int]], per_version: int, seed: int) -> list[tuple[str, bytes]]:
    """(label, whole request frame) for each advertised API version."""
    values = ExtremeValues(seed)
    frames = []
    for key, (low, high) in sorted(advertised.items()):
        api = APIS[key]
        for version in range(low, high + 1):
            if version not in api.request.valid_versions:  # advertised below what is parsed (Produce v0-2)
                continue
            flexible = version in api.request.flexible_versions
            for i in range(per_version):
                message = values.struct(api.request, version, flexible)
                client_id = values.string(False) if i % 4 == 3 else "extreme"
                frames.append((f"{api.name} v{version} #{i}",
                               encode_request(message, version, correlation_id=i + 1, client_id=client_id)))
    return frames
