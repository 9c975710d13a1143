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
  dicts, ``X | None``; numbers as stored: an int stays an int where a float is typed)
  and remembers the document's own keys and their order, and keys it does not know, so
  that ``to_json`` of a record read from the store gives back exactly that document,
  also one written by an older ssdlab (fewer keys) or a newer one (more keys).
  A value of the wrong type raises :class:`StoredDataError`.

Fields without a default are required in a document; suites give their result fields
defaults, so that the partial results of a running or failed test (``{}``,
``{"error": ...}``) read as records too.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from ssdlab.errors import EnvironmentProblem

__all__ = ["Record", "StoredDataError", "key"]

_KEY = "ssdlab.jsonrecord.key"


class StoredDataError(EnvironmentProblem):
    """A stored document does not have the shape its record type says (a store written
    by an ssdlab that stored it differently, or damaged): exit status 4."""


def key(name: str, **kwargs: Any) -> Any:
    """A dataclass field stored under ``name`` (a JSON key that is not a Python name, such
    as ``"pass"``); other keyword arguments as for :func:`dataclasses.field`."""
    metadata = dict(kwargs.pop("metadata", {}) or {})
    metadata[_KEY] = name
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
    _unknown: Mapping[str, Any] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False)

    # -- writing ------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The JSON object of this record (see the module's documentation)."""
        fields = _fields(type(self))
        if self._layout is None:
            return {
                f.key: _encode(getattr(self, f.name)) for f in fields.values()
                if not (f.name in self.OMIT_NONE and getattr(self, f.name) is None)
            }
        by_key = {f.key: f for f in fields.values()}
        out: dict[str, Any] = {}
        for k in self._layout:
            f = by_key.get(k)
            out[k] = _encode(getattr(self, f.name)) if f is not None else self._unknown[k]
        return out

    @classmethod
    def partial(cls, **values: Any) -> Self:
        """A record of only the fields given (the others at their defaults, not written):
        the result of a test that failed before it had one, e.g. ``{"error": ...}``."""
        record = cls(**values)
        fields = _fields(cls)
        object.__setattr__(record, "_layout", tuple(fields[name].key for name in values))
        return record

    # -- reading ------------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: object, where: str = "") -> Self:
        """The record of a stored JSON object; StoredDataError when it does not fit."""
        where = where or cls.__name__
        if not isinstance(data, Mapping):
            raise StoredDataError(f"{where}: expected a JSON object, got {_kind(data)}")
        fields = _fields(cls)
        by_key = {f.key: f for f in fields.values()}
        values: dict[str, Any] = {}
        for k, value in data.items():
            f = by_key.get(k)
            if f is not None:
                values[f.name] = _decode(f.type, value, f"{where}.{k}")
        missing = [f.key for f in fields.values() if f.required and f.name not in values]
        if missing:
            raise StoredDataError(f"{where}: missing {', '.join(missing)}")
        record = cls(**values)
        object.__setattr__(record, "_layout", tuple(data))
        object.__setattr__(record, "_unknown", {k: v for k, v in data.items()
                                                if k not in by_key})
        return record


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    key: str
    type: Any
    required: bool


_FIELDS: dict[type, dict[str, _Field]] = {}


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
        out[f.name] = _Field(f.name, f.metadata.get(_KEY, f.name), hints[f.name], required)
    _FIELDS[cls] = out
    return out


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


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
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        return _decode_union(typing.get_args(tp), value, where)
    if isinstance(tp, type) and issubclass(tp, Record):
        return tp.from_json(value, where)
    if origin is list:
        return _decode_list(typing.get_args(tp)[0], value, where)
    if origin is dict:
        return _decode_dict(typing.get_args(tp)[1], value, where)
    if origin is typing.Literal:
        if value not in typing.get_args(tp):
            raise StoredDataError(f"{where}: {value!r} is not one of {typing.get_args(tp)}")
        return value
    return _decode_plain(tp, value, where)


def _decode_list(item: Any, value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise StoredDataError(f"{where}: expected an array, got {_kind(value)}")
    return [_decode(item, v, f"{where}[{i}]") for i, v in enumerate(value)]


def _decode_dict(item: Any, value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StoredDataError(f"{where}: expected an object, got {_kind(value)}")
    return {k: _decode(item, v, f"{where}.{k}") for k, v in value.items()}


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
