"""Typed records of the JSON documents ssdlab stores (a test's result, its parts).

A suite's result is a frozen dataclass deriving from :class:`Record`: the run builds
one and stores ``record.to_json()``; the report, ``ssdlab show`` and the export read the
stored document back with ``Result.from_json(document)`` and get typed fields instead of
``dict[str, Any]``.

The JSON is the stored format, so the mapping is exact in both directions:

* ``to_json`` of a record the run built writes every field, in the order the dataclass
  declares them (the key order of the document), under its key (the field name, or
  ``key("pass")`` for a key that is not a Python name), except the fields named in
  ``OMIT_NONE`` while they are None (keys a document has only sometimes, such as
  ``error``); ``Result.partial(error=...)`` writes only the fields it is given (a test
  that failed before it had a result);
* ``from_json`` checks every value against the field's type (nested records, lists,
  tuples (stored as arrays), dicts, ``X | None``, ``Literal``, enums (stored as their
  value); numbers as stored: an int stays an int where a float is typed) and remembers
  the document's own keys and their order, and keys it does not know, so that
  ``to_json`` of a record read from the store gives back exactly that document, also one
  written by an older ssdlab (fewer keys) or a newer one (more keys).
  A value of the wrong type raises :class:`StoredDataError`.

A field declared with :func:`flat` holds a group of fields that several records share (a
nested record, e.g. fio's metrics of a cell): its fields are written inline, at the
field's place among the others, not as a nested object. A ``flat()`` field typed
``Group | None`` is a group a document has only sometimes (keys a newer ssdlab added):
None reads a document without any of its keys and writes none of them.

A document kept verbatim (fio's JSON, a target's facts shown as key/value) is a
:data:`JsonObject`: a field of that type is checked to be JSON and kept as it is.

Fields without a default are required in a document; suites give their result fields
defaults, so that the partial results of a running or failed test (``{}``,
``{"error": ...}``) read as records too.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeAlias

from ssdlab.errors import EnvironmentProblem

__all__ = ["JsonObject", "JsonValue", "Record", "StoredDataError", "flat", "is_json", "key"]

_KEY = "ssdlab.jsonrecord.key"
_FLAT = "ssdlab.jsonrecord.flat"

if TYPE_CHECKING:
    #: any JSON value: what ``json.loads`` gives (NaN and the infinities included: the
    #: store keeps them)
    JsonValue: TypeAlias = (
        bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None)
else:
    class JsonValue:
        """At run time, the mark of a field typed :data:`JsonValue` (its values are checked
        to be JSON and kept as they are); the type checker sees the recursive union."""

#: a JSON object (a document kept verbatim, or a part of one)
JsonObject: TypeAlias = dict[str, JsonValue]


class StoredDataError(EnvironmentProblem):
    """A stored document does not have the shape its record type says (a store written
    by an ssdlab that stored it differently, or damaged): exit status 4."""


def key(name: str, **kwargs: Any) -> Any:
    """A dataclass field stored under ``name`` (a JSON key that is not a Python name, such
    as ``"pass"``); other keyword arguments as for :func:`dataclasses.field`."""
    metadata = dict(kwargs.pop("metadata", {}) or {})
    metadata[_KEY] = name
    return dataclasses.field(metadata=metadata, **kwargs)


def flat(**kwargs: Any) -> Any:
    """A field whose record's fields are written inline, at its place in the document
    (see the module's documentation); keyword arguments as for :func:`dataclasses.field`.
    """
    metadata = dict(kwargs.pop("metadata", {}) or {})
    metadata[_FLAT] = True
    return dataclasses.field(metadata=metadata, **kwargs)


@dataclasses.dataclass(frozen=True)
class Record:
    """Base of the frozen dataclasses that are stored as JSON objects."""

    #: fields left out of ``to_json`` while they are None
    OMIT_NONE: ClassVar[frozenset[str]] = frozenset()

    # how the document this record was read from looked: its keys in order, and the
    # values of keys this type does not know (None: built by ssdlab, not read)
    _layout: tuple[str, ...] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False)
    _unknown: Mapping[str, JsonValue] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False)

    # -- writing ------------------------------------------------------------------------
    def to_json(self) -> JsonObject:
        """The JSON object of this record (see the module's documentation)."""
        if self._layout is None:
            out: JsonObject = {}
            for f in _fields(type(self)).values():
                value = getattr(self, f.name)
                if f.group is not None:
                    if value is not None:
                        out.update(value.to_json())
                elif not (f.name in self.OMIT_NONE and value is None):
                    out[f.key] = _encode(value)
            return out
        paths = _paths(type(self))
        return {k: _encode(_walk(self, paths[k])) if k in paths else self._unknown[k]
                for k in self._layout}

    @classmethod
    def partial(cls, **values: Any) -> Self:
        """A record of only the fields given (the others at their defaults, not written):
        the result of a test that failed before it had one, e.g. ``{"error": ...}``."""
        record = cls(**values)
        fields = _fields(cls)
        layout: list[str] = []
        for name in values:
            f = fields[name]
            if f.group is None:
                layout.append(f.key)
            elif values[name] is not None:
                layout += list(values[name].to_json())
        object.__setattr__(record, "_layout", tuple(layout))
        return record

    # -- reading ------------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: object, where: str = "") -> Self:
        """The record of a stored JSON object; StoredDataError when it does not fit."""
        where = where or cls.__name__
        if not isinstance(data, Mapping):
            raise StoredDataError(f"{where}: expected a JSON object, got {_kind(data)}")
        fields = _fields(cls)
        by_key = {f.key: f for f in fields.values() if f.group is None}
        values: dict[str, Any] = {}
        for k, value in data.items():
            f = by_key.get(k)
            if f is not None:
                values[f.name] = _decode(f.type, value, f"{where}.{k}")
        for f in fields.values():
            if f.group is None:
                continue
            keys = _paths(f.group)
            part = {k: v for k, v in data.items() if k in keys}
            if part or (f.required and not f.optional):
                values[f.name] = f.group.from_json(part, where)
            elif f.optional and f.required:
                values[f.name] = None
        missing = [f.key for f in fields.values() if f.required and f.name not in values]
        if missing:
            raise StoredDataError(f"{where}: missing {', '.join(missing)}")
        record = cls(**values)
        paths = _paths(cls)
        object.__setattr__(record, "_layout", tuple(data))
        object.__setattr__(record, "_unknown", {k: v for k, v in data.items()
                                                if k not in paths})
        return record


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    key: str  # the JSON key (a flat() field has none of its own: its name)
    type: Any
    required: bool
    group: type[Record] | None = None  # a flat() field's record type
    optional: bool = False  # a flat() field typed ``Group | None``


_FIELDS: dict[type, dict[str, _Field]] = {}
_PATHS: dict[type, dict[str, tuple[str, ...]]] = {}


def _fields(cls: type[Record]) -> dict[str, _Field]:
    """The stored fields of ``cls`` by name, in declaration order, with resolved types."""
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls)  # each class's annotations in its own module
    out = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        required = (f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING)
        if f.metadata.get(_FLAT):
            group, optional = _group_type(cls, f.name, hints[f.name])
            out[f.name] = _Field(f.name, f.name, hints[f.name], required, group, optional)
        else:
            out[f.name] = _Field(f.name, f.metadata.get(_KEY, f.name), hints[f.name],
                                 required)
    _FIELDS[cls] = out
    try:
        _paths(cls)  # two fields with one key: a TypeError when the type is first used
    except TypeError:
        del _FIELDS[cls]
        raise
    return out


def _group_type(cls: type, name: str, tp: Any) -> tuple[type[Record], bool]:
    """The record type of the flat() field ``name`` and whether it may be None."""
    options = typing.get_args(tp) if typing.get_origin(tp) in (
        types.UnionType, typing.Union) else (tp,)
    groups = [o for o in options if o is not type(None)]
    if len(groups) == 1 and isinstance(groups[0], type) and issubclass(groups[0], Record):
        return groups[0], len(options) > 1
    raise TypeError(f"{cls.__name__}.{name}: a flat() field must be a Record "
                    f"(or a Record | None), not {tp!r}")


def _paths(cls: type[Record]) -> dict[str, tuple[str, ...]]:
    """Each JSON key ``cls`` writes -> the field names that lead to its value (one name,
    or through flat() groups); a key two fields would write is a TypeError."""
    known = _PATHS.get(cls)
    if known is not None:
        return known
    out: dict[str, tuple[str, ...]] = {}
    for f in _fields(cls).values():
        inner = {f.key: ()} if f.group is None else _paths(f.group)
        for k, path in inner.items():
            if k in out:
                raise TypeError(f"{cls.__name__}: two fields are stored under {k!r}")
            out[k] = (f.name, *path)
    _PATHS[cls] = out
    return out


def _walk(record: Record, path: tuple[str, ...]) -> Any:
    value: Any = record
    for name in path:
        value = getattr(value, name)
    return value


def _encode(value: Any) -> JsonValue:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, enum.Enum):
        return _encode(value.value)
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    result: JsonValue = value
    return result


def is_json(value: object) -> bool:
    """Whether ``value`` is JSON as ``json.loads`` gives it (objects with text keys,
    arrays, text, numbers (NaN and the infinities too), true/false, null)."""
    if value is None or isinstance(value, str | bool | int | float):
        return True
    if isinstance(value, list):
        return all(is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json(v) for k, v in value.items())
    return False


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {dict: "an object", list: "an array", str: "text", int: "a whole number",
            float: "a number"}.get(type(value), type(value).__name__)


_PLAIN: dict[Any, tuple[type, ...]] = {
    str: (str,), bool: (bool,), int: (int,), float: (int, float),
}


def _decode(tp: Any, value: object, where: str) -> Any:
    """``value`` checked against the type ``tp`` (nested records built)."""
    if tp is Any or tp is object:
        return value
    if tp is JsonValue:
        if not is_json(value):
            raise StoredDataError(f"{where}: not a JSON value ({_kind(value)})")
        return value
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        return _decode_union(typing.get_args(tp), value, where)
    if isinstance(tp, type) and issubclass(tp, Record):
        return tp.from_json(value, where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _decode_enum(tp, value, where)
    container = _CONTAINERS.get(origin)
    if container is not None:
        return container(typing.get_args(tp), value, where)
    if origin is typing.Literal:
        if value not in typing.get_args(tp):
            raise StoredDataError(f"{where}: {value!r} is not one of {typing.get_args(tp)}")
        return value
    return _decode_plain(tp, value, where)


def _decode_list(items: tuple[Any, ...], value: object, where: str) -> list[Any]:
    (item,) = items
    if not isinstance(value, list):
        raise StoredDataError(f"{where}: expected an array, got {_kind(value)}")
    return [_decode(item, v, f"{where}[{i}]") for i, v in enumerate(value)]


def _decode_tuple(items: tuple[Any, ...], value: object, where: str) -> tuple[Any, ...]:
    """``tuple[X, ...]`` (any length) or ``tuple[X, Y]`` (these), stored as an array."""
    if len(items) == 2 and items[1] is Ellipsis:
        return tuple(_decode_list(items[:1], value, where))
    if not isinstance(value, list):
        raise StoredDataError(f"{where}: expected an array, got {_kind(value)}")
    if len(value) != len(items):
        raise StoredDataError(f"{where}: expected {len(items)} values, got {len(value)}")
    return tuple(_decode(t, v, f"{where}[{i}]") for i, (t, v) in enumerate(zip(items, value,
                                                                                 strict=True)))


def _decode_dict(items: tuple[Any, ...], value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StoredDataError(f"{where}: expected an object, got {_kind(value)}")
    return {k: _decode(items[1], v, f"{where}.{k}") for k, v in value.items()}


#: the decoders of the containers a field may be: origin -> f(type arguments, value, where)
_CONTAINERS: dict[Any, Callable[[tuple[Any, ...], object, str], Any]] = {
    list: _decode_list, tuple: _decode_tuple, dict: _decode_dict,
}


def _decode_enum(tp: type[enum.Enum], value: object, where: str) -> enum.Enum:
    try:
        member = tp(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in tp)
        raise StoredDataError(f"{where}: {value!r} is not one of {choices}") from None
    if type(member.value) is not type(value):  # 1 is not True, "1" is not 1
        raise StoredDataError(f"{where}: {value!r} is not one of {tp.__name__}'s values")
    return member


def _decode_plain(tp: Any, value: object, where: str) -> Any:
    plain = _PLAIN.get(tp)
    if plain is None:
        raise TypeError(f"{where}: a record field cannot be of type {tp!r}")
    if isinstance(value, bool) and tp is not bool:
        raise StoredDataError(f"{where}: expected {_kind(tp())}, got true/false")
    if not isinstance(value, plain):
        raise StoredDataError(f"{where}: expected {_kind(tp())}, got {_kind(value)}")
    return value


def _decode_union(options: tuple[Any, ...], value: object, where: str) -> Any:
    if value is None and type(None) in options:
        return None
    errors = []
    for option in options:
        if option is type(None):
            continue
        try:
            return _decode(option, value, where)
        except StoredDataError as exc:
            errors.append(str(exc))
    raise StoredDataError(errors[0] if len(errors) == 1 else
                          f"{where}: {_kind(value)} fits none of its types")
