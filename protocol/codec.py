"""The schema-driven codec: one compiled `construct` per (message, version).

`StructCodec` is a construct whose `_emitparse`/`_emitbuild` write straight-line Python for one
struct at one version (fields in wire order, then the tagged section in flexible versions), and
recurse into nested structs and arrays. `construct`'s compiler turns the tree into one module per
(message, version); nothing generated is written to disk.

Values are plain objects (see protocol/messages.py): the parser creates them with every field set,
fields absent from the version taking their spec default.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any

from construct import Construct

from . import wire
from .errors import ErrorCode, ProtocolError
from .specs import FieldSpec, Versions

_FIXED = {
    "int8": ("I8", 1), "int16": ("I16", 2), "uint16": ("U16", 2), "int32": ("I32", 4),
    "uint32": ("U32", 4), "int64": ("I64", 8), "float64": ("F64", 8),
}

# Names the generated code uses, injected into each compiled module.
_RUNTIME = {
    name: getattr(wire, name)
    for name in dir(wire)
    if name.startswith(("read_", "write_")) or name in ("uvarint_bytes", "tagged_bytes", "BytesIO")
}
for _name, (_struct_name, _) in _FIXED.items():
    _RUNTIME[_struct_name + "u"] = getattr(wire, _struct_name).unpack
    _RUNTIME[_struct_name + "p"] = getattr(wire, _struct_name).pack


class UnsupportedFieldValue(ProtocolError):
    """A non-ignorable field holds a value the chosen version cannot carry."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)


def default_value(spec: FieldSpec, struct_class: type | None):
    """A fresh default value for a field (the spec's `default`, or the type's zero)."""
    raw = spec.default
    if raw == "null":
        return None
    if spec.is_array:
        return []
    if spec.is_struct:
        assert struct_class is not None, f"{spec.name}: a struct field needs its class"
        return struct_class()
    t = spec.type
    if t in _FIXED:
        text = str(raw) if raw not in (None, "") else "0"
        return float(text) if t == "float64" else int(text, 0)
    if t == "bool":
        return raw is True or str(raw).lower() == "true"
    if t == "string":
        return "" if raw is None else str(raw)
    if t == "uuid":
        return wire.ZERO_UUID
    if t == "bytes":
        return b""
    return None  # records


def is_immutable_default(spec: FieldSpec) -> bool:
    return not (spec.is_array or spec.is_struct) or spec.default == "null"


def _tag_of(spec: FieldSpec) -> int:
    assert spec.tag is not None, f"{spec.name} is tagged without a tag"  # specs.py checks both are given
    return spec.tag


class StructCodec(Construct):
    """Parser and builder of one struct at one version, emitted as Python source.

    `classes` maps id(FieldSpec) of every struct-typed field to the Python class of its values;
    `root_class` is the class of this struct itself.
    """

    def __init__(self, name: str, root_class: type, fields: list[FieldSpec], version: int,
                 flexible: Versions, classes: dict[int, type]):
        super().__init__()
        self.name = name
        self.root_class = root_class
        self.fields = fields
        self.version = version
        self.flexible = version in flexible
        self.classes = classes
        self.namespace: dict[str, object] = dict(_RUNTIME)

    # --- construct interface ----------------------------------------------------------------------

    def _emitparse(self, code) -> str:
        parse_name, _ = self._emit_struct(code, self.root_class, self.fields)
        return f"{parse_name}(io)"

    def _emitbuild(self, code) -> str:
        _, build_name = self._emit_struct(code, self.root_class, self.fields)
        return f"({build_name}(io, obj), obj)[1]"

    def _parse(self, stream, context, path):
        return self.compile_codec().parsefunc(stream, context)

    def _build(self, obj, stream, context, path):
        return self.compile_codec().buildfunc(obj, stream, context)

    def compile_codec(self):
        compiled = self.compile()
        compiled.module.__dict__.update(self.namespace)
        return compiled

    # --- emission ----------------------------------------------------------------------------------

    def _ref(self, code, prefix: str, obj) -> str:
        name = f"{prefix}_{code.allocateId()}"
        self.namespace[name] = obj
        return name

    def _emit_struct(self, code, cls: type, fields: list[FieldSpec]) -> tuple[str, str]:
        cache = code.__dict__.setdefault("ebb_structs", {})
        key = (id(cls), id(self))
        if key in cache:
            return cache[key]
        n = code.allocateId()
        parse_name, build_name = f"parse_struct_{n}", f"build_struct_{n}"
        cache[key] = (parse_name, build_name)
        cls_name = self._ref(code, "CLS", cls)
        v = self.version
        present = [f for f in fields if v in f.versions and v not in f.tagged_versions]
        tagged = sorted((f for f in fields if v in f.tagged_versions), key=_tag_of)
        absent = [f for f in fields if v not in f.versions]

        parse = [f"def {parse_name}(io):", f"    o = {cls_name}.__new__({cls_name})"]
        for f in present:
            parse.append(f"    o.{f.attr} = {self._parse_expr(code, f)}")
        for f in absent + tagged:
            parse.append(f"    o.{f.attr} = {self._default_expr(code, f)}")
        if self.flexible:
            parse += self._parse_tagged(code, tagged)
        parse.append("    return o")

        build = [f"def {build_name}(io, o):"]
        for f in present:
            build += ["    " + s for s in self._build_stmts(code, f, f"o.{f.attr}")]
        for f in absent:
            if not f.ignorable:
                build += self._check_absent(code, f)
        if self.flexible:
            build += self._build_tagged(code, tagged)
        build.append("    return o")

        code.append("\n".join(parse) + "\n")
        code.append("\n".join(build) + "\n")
        return parse_name, build_name

    def _default_expr(self, code, f: FieldSpec) -> str:
        cls = self.classes.get(id(f))
        if is_immutable_default(f):
            return self._ref(code, "DEF", default_value(f, cls))
        if f.is_array:
            return "[]"
        return f"{self._ref(code, 'CLS', cls)}()"

    def _check_absent(self, code, f: FieldSpec) -> list[str]:
        default = self._ref(code, "DEF", default_value(f, self.classes.get(id(f))))
        msg = f"field {f.name} does not exist in version {self.version}; it must keep its default"
        return [
            f"    if o.{f.attr} != {default}:",
            f"        raise UnsupportedFieldValue({msg!r})",
        ]

    def _parse_tagged(self, code, tagged: list[FieldSpec]) -> list[str]:
        if not tagged:
            return ["    for _ in range(read_uvarint(io)):",
                    "        read_uvarint(io)",
                    "        read_exact(io, read_uvarint(io))"]
        lines = ["    for _ in range(read_uvarint(io)):",
                 "        tag = read_uvarint(io)",
                 "        data = read_exact(io, read_uvarint(io))"]
        keyword = "if"
        for f in tagged:
            fn = f"parse_tag_{code.allocateId()}"
            code.append(f"def {fn}(io):\n    return {self._parse_expr(code, f)}\n")
            lines.append(f"        {keyword} tag == {f.tag}:")
            lines.append(f"            o.{f.attr} = {fn}(BytesIO(data))")
            keyword = "elif"
        return lines

    def _build_tagged(self, code, tagged: list[FieldSpec]) -> list[str]:
        if not tagged:
            return ["    io.write(b'\\x00')"]
        lines = ["    tags = []"]
        for f in tagged:
            fn = f"build_tag_{code.allocateId()}"
            body = "\n".join("    " + s for s in self._build_stmts(code, f, "v"))
            code.append(f"def {fn}(io, v):\n{body}\n")
            default = self._ref(code, "DEF", default_value(f, self.classes.get(id(f))))
            lines.append(f"    if o.{f.attr} != {default}:")
            lines.append(f"        tags.append(({f.tag}, tagged_bytes({fn}, o.{f.attr})))")
        lines.append("    write_tagged_section(io, tags)")
        return lines

    def _compact(self, f: FieldSpec) -> bool:
        if f.flexible_versions is not None:
            return self.version in f.flexible_versions
        return self.flexible

    def _parse_expr(self, code, f: FieldSpec) -> str:
        nullable = self.version in f.nullable_versions
        compact = self._compact(f)
        if f.is_array:
            fn = f"parse_array_{code.allocateId()}"
            length = "read_compact_array_len" if compact else "read_array_len"
            elem = self._element_parse(code, f, compact, False)
            code.append(
                f"def {fn}(io):\n"
                f"    n = {length}(io, {nullable})\n"
                f"    if n is None:\n        return None\n"
                f"    return [{elem} for _ in range(n)]\n"
            )
            return f"{fn}(io)"
        expr = self._element_parse(code, f, compact, nullable)
        if f.is_struct and nullable:
            return f"(None if I8u(io.read(1))[0] < 0 else {expr})"
        return expr

    def _element_parse(self, code, f: FieldSpec, compact: bool, nullable: bool) -> str:
        t = f.element_type
        if f.is_struct:
            parse_name, _ = self._emit_struct(code, self.classes[id(f)], f.fields)
            return f"{parse_name}(io)"
        if t in _FIXED:
            name, width = _FIXED[t]
            return f"{name}u(io.read({width}))[0]"
        if t == "bool":
            return "read_bool(io)"
        if t == "uuid":
            return "read_uuid(io)"
        prefix = "read_compact_" if compact else "read_"
        kind = "string" if t == "string" else "bytes"
        return f"{prefix}{kind}(io, {nullable})"

    def _build_stmts(self, code, f: FieldSpec, value: str) -> list[str]:
        nullable = self.version in f.nullable_versions
        compact = self._compact(f)
        if f.is_array:
            fn = f"build_array_{code.allocateId()}"
            length = "write_compact_array_len" if compact else "write_array_len"
            elem = self._element_build(code, f, compact, "e", False)
            code.append(
                f"def {fn}(io, v):\n"
                f"    {length}(io, v, {nullable})\n"
                f"    if v is not None:\n"
                f"        for e in v:\n"
                f"            {elem}\n"
            )
            return [f"{fn}(io, {value})"]
        stmt = self._element_build(code, f, compact, value, nullable)
        if f.is_struct and nullable:
            return [f"if {value} is None:", "    io.write(b'\\xff')", "else:", "    io.write(b'\\x01')",
                    "    " + stmt]
        return [stmt]

    def _element_build(self, code, f: FieldSpec, compact: bool, value: str, nullable: bool) -> str:
        t = f.element_type
        if f.is_struct:
            _, build_name = self._emit_struct(code, self.classes[id(f)], f.fields)
            return f"{build_name}(io, {value})"
        if t in _FIXED:
            return f"io.write({_FIXED[t][0]}p({value}))"
        if t == "bool":
            return f"io.write(b'\\x01' if {value} else b'\\x00')"
        if t == "uuid":
            return f"io.write({value}.bytes)"
        if t == "string" and not compact and f.name.endswith("ErrorMessage"):
            return f"write_free_text(io, {value}, {nullable})"
        prefix = "write_compact_" if compact else "write_"
        kind = "string" if t == "string" else "bytes"
        return f"{prefix}{kind}(io, {value}, {nullable})"


_RUNTIME["UnsupportedFieldValue"] = UnsupportedFieldValue

_DECODE_ERRORS = (struct.error, ValueError, TypeError, IndexError, OverflowError, RecursionError, MemoryError)


class CompiledStruct:
    """The compiled parser/builder pair of one (message, version), with the typed-error contract."""

    __slots__ = ("name", "version", "_parse", "_build")

    def __init__(self, codec: StructCodec):
        compiled = codec.compile_codec()
        self.name = codec.name
        self.version = codec.version
        self._parse = compiled.parsefunc
        self._build = compiled.buildfunc

    def decode_from(self, io: BytesIO):
        try:
            return self._parse(io, None)
        except ProtocolError:
            raise
        except _DECODE_ERRORS as exc:
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST, f"{self.name} v{self.version}: malformed ({exc})"
            ) from None

    def decode(self, data: bytes | bytearray | memoryview) -> Any:  # the message object; VersionView types it
        io = BytesIO(data)
        obj = self.decode_from(io)
        left = len(data) - io.tell()
        if left:
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST, f"{self.name} v{self.version}: {left} bytes left after the message"
            )
        return obj

    def encode_into(self, io: BytesIO, obj) -> None:
        self._build(obj, io, None)

    def encode(self, obj) -> bytes:
        io = BytesIO()
        self._build(obj, io, None)
        return io.getvalue()


__all__ = ["CompiledStruct", "StructCodec", "UnsupportedFieldValue", "default_value", "is_immutable_default"]
