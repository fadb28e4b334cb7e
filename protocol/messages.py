"""Message classes built from the specs at import time (their codecs on first use), and the registry of APIs.

    from protocol.messages import DeleteRecordsRequest
    req = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(name="t")], timeout_ms=500)
    data = DeleteRecordsRequest[3].encode(req)         # the version is picked with one subscript
    back = DeleteRecordsRequest[3].decode(data)

Attribute names are the spec names in snake_case (`LogStartOffset` -> `log_start_offset`). Nested
struct classes hang off their message class under their spec type name.

The classes are made at run time, so type checkers and editors read them from the stubs in
protocol/_messages.pyi, which `python -m protocol.stubs` writes from the same specs
(tests/protocol/test_stubs.py fails when they fall out of step).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from types import FunctionType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from .codec import CompiledStruct, StructCodec, default_value, is_immutable_default
from .errors import ErrorCode, ProtocolError
from .specs import FieldSpec, MessageSpec, SpecError, Versions, load_all

if TYPE_CHECKING:
    # Every message class by name, as the checker should see the names globals().update() adds below.
    from ._messages import *  # noqa: F403

_M = TypeVar("_M", bound="ApiMessage")
_T = TypeVar("_T")


class Struct:
    """Base of every message and nested struct: plain attributes, equality by value."""

    __slots__ = ()
    _specs: tuple[FieldSpec, ...] = ()
    _defaults: tuple[tuple[str, object, bool], ...] = ()

    # __init__(self, *, field=default, ...) is made for each class by _compile_init below.

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        return all(getattr(self, a) == getattr(other, a) for a, _, _ in self._defaults)

    def __repr__(self) -> str:
        inner = ", ".join(f"{a}={getattr(self, a)!r}" for a, _, _ in self._defaults)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict:
        def plain(value):
            if isinstance(value, Struct):
                return value.to_dict()
            if isinstance(value, list):
                return [plain(v) for v in value]
            return value

        return {a: plain(getattr(self, a)) for a, _, _ in self._defaults}


class VersionView(Generic[_M]):
    """One (message, version): `encode`, `decode`, and construction of instances."""

    def __init__(self, message_class: type[_M], version: int, build_codec: Callable[[int], CompiledStruct]):
        self.message_class = message_class
        self.version = version
        self._build_codec = build_codec
        self._codec: CompiledStruct | None = None

    @property
    def codec(self) -> CompiledStruct:
        """The compiled parser and builder, made on first use: compiling all ~400 (message, version)
        pairs up front cost every process (an `ebb` command, the broker) over half a second."""
        codec = self._codec
        if codec is None:
            codec = self._codec = self._build_codec(self.version)
        return codec

    @property
    def flexible(self) -> bool:
        return self.version in self.message_class.flexible_versions

    def __call__(self, **values: Any) -> _M:
        return self.message_class(**values)

    def encode(self, obj: _M) -> bytes:
        return self.codec.encode(obj)

    def decode(self, data: bytes | bytearray | memoryview) -> _M:
        return self.codec.decode(data)

    def __repr__(self) -> str:
        return f"{self.message_class.__name__}[{self.version}]"


class _MessageMeta(type):
    _views: dict[int, VersionView[Any]]
    valid_versions: Versions

    # mypy takes a metaclass method's `cls` only as an unbounded type[_T], and VersionView wants an
    # ApiMessage: every class of this metaclass is one.
    def __getitem__(cls: type[_T], version: int) -> VersionView[_T]:  # type: ignore[type-var]
        meta = cast(_MessageMeta, cls)  # `cls` is typed as the message class so that its view is typed
        view = meta._views.get(version)
        if view is None:
            raise ProtocolError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"{meta.__name__} has no version {version} (valid {meta.valid_versions})",
            )
        return view


class ApiMessage(Struct, metaclass=_MessageMeta):
    """A top-level request, response, header or data struct."""

    __slots__ = ()
    spec: MessageSpec
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    _views: dict[int, VersionView[Any]]

    def encode(self, version: int) -> bytes:
        return type(self)[version].encode(self)

    @classmethod
    def decode(cls: type[_M], data: bytes | bytearray | memoryview, version: int) -> _M:
        return cls[version].decode(data)


_R = TypeVar("_R", bound=ApiMessage)


class ApiRequest(ApiMessage, Generic[_R]):
    """A request. Its stub names its response class (`DeleteRecordsRequest(ApiRequest[DeleteRecordsResponse])`),
    so that a client's `request(body)` is typed by what it sent."""

    __slots__ = ()


_UNSET = object()


def _compile_init(name: str, defaults: tuple[tuple[str, object, bool], ...]) -> FunctionType:
    """`__init__(self, *, <field>=..., ...)` for one struct class, written out field by field: every
    response and request object is made through it, and a generic walk over the defaults cost
    several µs an object. A field not given gets its default: immutable ones shared, an array a new
    empty list, a nested struct a new default instance, anything else a deep copy."""
    namespace: dict[str, object] = {"_UNSET": _UNSET, "_deepcopy": copy.deepcopy}
    lines = []
    for i, (attr, default, immutable) in enumerate(defaults):
        assert attr != "self", f"{name}: a field named self"
        if immutable:
            namespace[f"_d{i}"] = default
            fallback = f"_d{i}"
        elif type(default) is list:  # an array's default is always empty
            fallback = "[]"
        elif isinstance(default, Struct):
            namespace[f"_d{i}"] = type(default)
            fallback = f"_d{i}()"
        else:
            namespace[f"_d{i}"] = default
            fallback = f"_deepcopy(_d{i})"
        lines.append(f"    self.{attr} = {fallback} if {attr} is _UNSET else {attr}")
    params = "".join(f", {attr}=_UNSET" for attr, _, _ in defaults)
    source = f"def __init__(self{', *' if defaults else ''}{params}):\n" + ("\n".join(lines) or "    pass") + "\n"
    exec(source, namespace)  # noqa: S102 - the source is built here from the specs' field names
    init = cast(FunctionType, namespace["__init__"])
    init.__qualname__ = f"{name}.__init__"  # what a TypeError for an unknown field names
    return init


def _make_class(name: str, fields: list[FieldSpec], classes: dict[int, type], base: type[Struct],
                namespace: dict[str, object]) -> type[Struct]:
    """Create the class for one struct and, recursively, the classes of its nested structs."""
    nested: dict[str, type[Struct]] = {}
    for f in fields:
        if f.is_struct:
            if f.element_type not in nested:
                nested[f.element_type] = _make_class(f.element_type, f.fields, classes, Struct, {})
            classes[id(f)] = nested[f.element_type]
    defaults = tuple(
        (f.attr, default_value(f, classes.get(id(f))), is_immutable_default(f)) for f in fields
    )
    body = dict(namespace)
    body.update(nested)
    body.update(__slots__=tuple(f.attr for f in fields), _specs=tuple(fields), _defaults=defaults,
                __init__=_compile_init(name, defaults))
    return type(name, (base,), body)


def _build_message_class(spec: MessageSpec) -> type[ApiMessage]:
    classes: dict[int, type] = {}
    base = ApiRequest if spec.type == "request" else ApiMessage
    cls = _make_class(spec.name, spec.fields, classes, base, {
        "spec": spec, "api_key": spec.api_key, "valid_versions": spec.valid_versions,
        "flexible_versions": spec.flexible_versions,
    })
    assert issubclass(cls, ApiMessage)

    def build_codec(version: int) -> CompiledStruct:
        return CompiledStruct(StructCodec(spec.name, cls, spec.fields, version, spec.flexible_versions, classes))

    cls._views = {v: VersionView(cls, v, build_codec) for v in spec.valid_versions}
    return cls


@dataclass(frozen=True)
class Api:
    """One API key: its request and response classes and the versions both specs cover."""

    key: int
    name: str
    request: type[ApiMessage]
    response: type[ApiMessage]

    @property
    def versions(self) -> Versions:
        return self.request.valid_versions.intersect(self.response.valid_versions)

    @property
    def flexible_versions(self) -> Versions:
        return self.request.flexible_versions


MESSAGES: dict[str, type[ApiMessage]] = {}
APIS: dict[int, Api] = {}


def _load() -> None:
    for name, spec in load_all().items():
        MESSAGES[name] = _build_message_class(spec)
    for name, cls in MESSAGES.items():
        if cls.spec.type == "request":
            base = name[: -len("Request")]
            response = MESSAGES.get(base + "Response")
            key = cls.api_key
            if key is None or response is None or response.api_key != key:
                raise SpecError(f"{name}.json has no apiKey or no matching {base}Response.json with the same apiKey")
            APIS[key] = Api(key, base, cls, response)


def api(key: int) -> Api:
    """The API with this key, or ProtocolError(INVALID_REQUEST) for a key we have no spec for."""
    found = APIS.get(key)
    if found is None:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"unknown api key {key}")
    return found


_load()
globals().update(MESSAGES)
