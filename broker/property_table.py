"""How a typed property is declared, checked and parsed: the one owner for every settings table.

A table is a frozen dataclass whose fields are declared with `prop(name, default, minimum=, maximum=)`,
Kafka's property name beside the Python one (LogConfig, LogManagerConfig, the broker's replication and
transaction settings). `parse_table(cls, props)` reads a table from server.properties text strictly, as
Kafka's ConfigDef does: an integer or a boolean that does not parse, or a value out of its bounds, is a
ConfigError naming the property. `apply_properties(config, props)` sets values already checked (a
topic's overrides, which broker/topic_configs.py checks) on a table. `int_property` and
`bool_property` are the same checks for the broker properties that are not in a table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, field, fields, replace
from typing import Any, TypeVar


class ConfigError(Exception):
    """A setting that stops start-up; the message names the property."""


def prop(name: str, default: Any, *, minimum: int | None = None, maximum: int | None = None) -> Any:
    """A table field for property `name`; `minimum` and `maximum` bound it where the table is parsed."""
    return field(default=default, metadata={"property": name, "minimum": minimum, "maximum": maximum})


def table_properties(table: Any) -> dict[str, Field[Any]]:
    """Property name -> field, in declaration order (a table class or an instance)."""
    return {f.metadata["property"]: f for f in fields(table) if "property" in f.metadata}


def property_text(value: object) -> str:
    """A setting's value as Kafka prints it (Java's booleans and doubles)."""
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value).replace("e+", "E") if isinstance(value, float) else str(value)


def table_defaults(cls: type) -> dict[str, str]:
    """Each property of the table with its default, as Kafka prints it."""
    return {name: property_text(spec.default) for name, spec in table_properties(cls).items()}


_Table = TypeVar("_Table")


def parse_table(cls: type[_Table], props: Mapping[str, str], **fixed: Any) -> _Table:
    """The table from property text (a property not set keeps its default), each value checked;
    `fixed` sets fields that are not read from a property of their own."""
    values = dict(fixed)
    for name, spec in table_properties(cls).items():
        if name not in props:
            continue
        if isinstance(spec.default, bool):
            values[spec.name] = bool_property(props, name)
        elif isinstance(spec.default, int):
            values[spec.name] = int_property(props, name, spec.metadata["minimum"], spec.metadata["maximum"])
        else:
            raise TypeError(f"{name}: parse_table reads integers and booleans only")
    return cls(**values)


def int_property(props: Mapping[str, str], key: str, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = props[key]
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"{key}: {raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{key}: {value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{key}: {value} is above the maximum {maximum}")
    return value


def bool_property(props: Mapping[str, str], key: str) -> bool:
    raw = str(props[key]).strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError(f"{key}: {props[key]!r} is not true or false")
    return raw == "true"


def apply_properties(config: _Table, props: Mapping[str, Any]) -> _Table:
    """`config` with the properties in `props` set, converted to each field's type (values already
    checked: a list is comma-separated, a field whose default is None takes an integer or null);
    ValueError names a property the table does not have or a value that does not convert (a boolean
    other than true/false included)."""
    by_name = table_properties(config)
    changes: dict[str, Any] = {}
    for key, raw in props.items():
        spec = by_name.get(key)
        if spec is None:
            raise ValueError(f"unknown log property {key!r}")
        try:
            changes[spec.name] = _convert(spec.default, getattr(config, spec.name), raw)
        except ValueError:
            raise ValueError(f"{key}: {raw!r} is not a valid value") from None
    return replace(config, **changes)  # type: ignore[type-var]


def _convert(default: Any, current: Any, raw: Any) -> Any:
    if isinstance(default, tuple):
        items = raw.split(",") if isinstance(raw, str) else list(raw)
        return tuple(item.strip() for item in items if item.strip())
    if default is None:
        return None if raw in (None, "", "null") else int(raw)
    if isinstance(current, bool):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):  # as Kafka's ConfigDef: "yes" is an error, not false
            raise ValueError(text)
        return text == "true"
    if isinstance(current, float):
        return float(raw)
    if isinstance(current, int):
        return int(raw)
    return str(raw)
