"""Load and check the JSON message specs in schemas/.

Every spec is validated against schemas/meta-schema.json and then against the rules the JSON Schema
cannot express (tags, nullability, tagged ranges). A bad spec fails loudly with its file and field.

Validating against the meta-schema (and importing jsonschema) cost every process a quarter of a second,
so `load_all` records a verdict: once the specs as they are now have passed, an empty stamp named by the
digest of their bytes and the meta-schema's goes into the user's cache directory
(`$XDG_CACHE_HOME/ebb`, else `~/.cache/ebb`; nothing is kept when it cannot be written). A later load
of the same bytes skips the meta-schema; any edit changes the digest and validates again. The rules
of this module run on every load.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

MAX_VERSION = 32767
PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string", "uuid", "bytes",
     "records"}
)
NULLABLE_TYPES = frozenset({"string", "bytes", "records"})


class SpecError(Exception):
    """A message spec that breaks the spec language."""


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; empty when low > high."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> Versions:
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        return self.low > self.high

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.low, other.low), min(self.high, other.high))

    def is_subset_of(self, other: Versions) -> bool:
        return self.empty or (other.low <= self.low and self.high <= other.high)

    def __iter__(self):
        return iter(range(self.low, self.high + 1))

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high == MAX_VERSION:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NO_VERSIONS = Versions(1, 0)


@dataclass
class FieldSpec:
    name: str
    type: str
    versions: Versions
    about: str
    nullable_versions: Versions = NO_VERSIONS
    tagged_versions: Versions = NO_VERSIONS
    tag: int | None = None
    default: str | bool | int | None = None
    ignorable: bool = False
    flexible_versions: Versions | None = None
    fields: list[FieldSpec] = field(default_factory=list)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """True for a struct or an array of structs."""
        return self.element_type not in PRIMITIVES

    @property
    def attr(self) -> str:
        return snake_case(self.name)


@dataclass
class MessageSpec:
    name: str
    type: str
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    fields: list[FieldSpec]
    notes: list[str]
    path: str


@cache  # ~9,000 calls for a few hundred distinct names when the classes are built
def snake_case(name: str) -> str:
    """`LogStartOffset` -> `log_start_offset`, the attribute name a message object uses."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return name.lower()


def schemas_dir() -> Path:
    return Path(str(resources.files("schemas")))


@cache
def meta_schema_bytes() -> bytes:
    return (schemas_dir() / "meta-schema.json").read_bytes()


@cache
def meta_schema() -> dict:
    return json.loads(meta_schema_bytes())


def load_spec_file(path: Path) -> MessageSpec:
    """One spec, checked against the meta-schema and the rules here."""
    return _parse_spec(_read_bytes(path), path.name, check_meta_schema=True)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SpecError(f"{path.name}: not readable: {exc}") from exc


def _parse_spec(data: bytes, filename: str, check_meta_schema: bool) -> MessageSpec:
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise SpecError(f"{filename}: not readable as JSON: {exc}") from exc
    if check_meta_schema:
        import jsonschema  # only when a verdict is due: its import alone costs ~0.1 s

        errors = sorted(jsonschema.Draft202012Validator(meta_schema()).iter_errors(raw), key=lambda e: e.path)
        if errors:
            first = errors[0]
            raise SpecError(f"{filename}: {_describe_path(raw, first.absolute_path)}: {first.message}")
    return _build_message(raw, filename)


def _describe_path(raw: dict, path) -> str:
    """Turn a JSON path like fields/2/fields/0/type into fields[Topics].fields[Name].type."""
    parts: list[str] = []
    node: Any = raw  # any JSON value on the way down
    for step in path:
        if isinstance(step, int) and isinstance(node, list):
            item = node[step]
            label = item.get("name", step) if isinstance(item, dict) else step
            parts[-1] += f"[{label}]"
            node = item
        else:
            parts.append(str(step))
            node = node.get(step) if isinstance(node, dict) else None
    return ".".join(parts) or "<top>"


def _build_message(raw: dict, filename: str) -> MessageSpec:
    common = {s["name"]: s["fields"] for s in raw.get("commonStructs", [])}
    flexible = Versions.parse(raw["flexibleVersions"])
    valid = Versions.parse(raw["validVersions"])
    fields = [_build_field(f, common, flexible, valid, f"{filename}: {f['name']}") for f in raw["fields"]]
    _check_tags(fields, filename)
    return MessageSpec(
        name=raw["name"], type=raw["type"], api_key=raw.get("apiKey"), valid_versions=valid,
        flexible_versions=flexible, fields=fields, notes=raw.get("notes", []), path=filename,
    )


def _build_field(raw: dict, common: dict, flexible: Versions, parent: Versions, where: str) -> FieldSpec:
    tagged = Versions.parse(raw.get("taggedVersions", "none"))
    versions = Versions.parse(raw["versions"]) if "versions" in raw else tagged
    spec = FieldSpec(
        name=raw["name"], type=raw["type"], versions=versions.intersect(parent), about=raw["about"],
        nullable_versions=Versions.parse(raw.get("nullableVersions", "none")), tagged_versions=tagged,
        tag=raw.get("tag"), default=raw.get("default"), ignorable=raw.get("ignorable", False),
        flexible_versions=Versions.parse(raw["flexibleVersions"]) if "flexibleVersions" in raw else None,
    )
    if spec.is_struct:
        child_raw = raw.get("fields")
        if child_raw is None:
            child_raw = common.get(spec.element_type)
        if child_raw is None:
            raise SpecError(f"{where}: struct type {spec.element_type} has no fields and no commonStruct")
        spec.fields = [
            _build_field(c, common, flexible, spec.versions, f"{where}.{c['name']}") for c in child_raw
        ]
        _check_tags(spec.fields, where)
    elif "fields" in raw:
        raise SpecError(f"{where}: primitive type {spec.type} cannot have fields")
    _check_field(spec, flexible, where)
    return spec


def _check_field(spec: FieldSpec, flexible: Versions, where: str) -> None:
    if (spec.tag is None) != spec.tagged_versions.empty:
        raise SpecError(f"{where}: 'tag' and 'taggedVersions' must be given together")
    if not spec.tagged_versions.empty:
        if not spec.tagged_versions.is_subset_of(flexible):
            raise SpecError(f"{where}: taggedVersions {spec.tagged_versions} outside flexibleVersions")
        if spec.type == "records":
            raise SpecError(f"{where}: a records field cannot be tagged")
    nullable_ok = spec.is_array or spec.is_struct or spec.type in NULLABLE_TYPES
    if not spec.nullable_versions.empty and not nullable_ok:
        raise SpecError(f"{where}: type {spec.type} cannot be nullable")
    if spec.flexible_versions is not None and spec.type not in ("string", "bytes"):
        raise SpecError(f"{where}: per-field flexibleVersions is only allowed on string and bytes")


def _check_tags(fields: list[FieldSpec], where: str) -> None:
    seen: set[int] = set()
    for f in fields:
        if f.tag is not None:
            if f.tag in seen:
                raise SpecError(f"{where}: tag {f.tag} used twice ({f.name})")
            seen.add(f.tag)


STAMP_PREFIX = "validated-"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ebb"


def validated_stamp(files: dict[str, bytes]) -> Path:
    """Where the verdict for exactly these spec files (name -> bytes) and this meta-schema is kept."""
    digest = hashlib.sha256()
    for name, data in [("meta-schema.json", meta_schema_bytes()), *sorted(files.items())]:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return cache_dir() / f"{STAMP_PREFIX}{digest.hexdigest()}"


def _record_verdict(stamp: Path) -> None:
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()  # empty: its name is the verdict. Checkouts with other specs keep stamps of their own
    except OSError:
        pass  # a read-only install validates on every load, as it did before the stamp


def load_directory(directory: Path) -> dict[str, MessageSpec]:
    """Every spec in `directory`, by message name; the meta-schema is checked unless the stamp for these
    exact bytes says it passed."""
    files = {path.name: _read_bytes(path) for path in sorted(directory.glob("*.json"))
             if path.name != "meta-schema.json"}
    stamp = validated_stamp(files)
    already_valid = stamp.exists()
    specs = {}
    for filename, data in files.items():
        spec = _parse_spec(data, filename, check_meta_schema=not already_valid)
        if spec.name != Path(filename).stem:
            raise SpecError(f"{filename}: name {spec.name!r} does not match the file name")
        specs[spec.name] = spec
    if not already_valid:
        _record_verdict(stamp)
    return specs


@cache
def load_all() -> dict[str, MessageSpec]:
    """Every spec in schemas/, by message name."""
    return load_directory(schemas_dir())
