"""What a config file (``ssdlab run SUITE --config FILE``) may hold, and reading one.

A config file holds the settings of one suite by the long names of its command-line
options (``max-rounds = 8``; ``max_rounds`` works too), as TOML or JSON, either at the
top level or under one table named after the suite (``[pts]``). Each option of a suite
says whether it is a setting and of which kind (``ssdlab.plan.suite.Opt.config``); a test
checks the keys against the parsers, so a new option needs that decision (file or
command line only).

:func:`parse_config` turns the file's bytes into checked values: the right type, finite
numbers, no unknown keys, no control characters. The values then go through the same
conversion and validation as command-line text (argparse types and choices, then the
suite's plan builder), in :mod:`ssdlab.cli.config_opts`. Pure: bytes in, values out;
every refusal is a one-line :class:`~ssdlab.errors.UserError` naming the file and key.

The caller passes every suite's keys (:func:`ssdlab.suites.config_schemas`).

docs/config.md describes the format for users.
"""

from __future__ import annotations

import difflib
import enum
import json
import math
import tomllib
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ssdlab.errors import UserError, command

MAX_CONFIG_BYTES = 1 << 20
#: file name suffix -> format
FORMATS = {".toml": "TOML", ".json": "JSON"}
#: whole numbers beyond this are refused as they are read (no option wants them)
MAX_INTEGER = 2**63 - 1
MAX_TEXT_CHARS = 4096
_SHOWN_CHARS = 40


class Kind(enum.Enum):
    """The type a key takes in a config file (and what the error messages call it)."""

    INT = "a whole number"
    FLOAT = "a number"
    TEXT = "text"
    SIZE = "a size: text such as \"1GiB\" or a whole number"
    LIST = "a list: an array such as [4, 64] or text such as \"4,64\""
    BOOL = "true or false"
    LOAD = "a whole number or \"auto\""


Value = int | float | str | bool

#: options that never come from a file, and why (docs/config.md)
COMMAND_LINE_ONLY = {
    "target": "a config file never chooses what is overwritten: give --target on the "
    "command line",
    "targets-file": "a config file never chooses what is overwritten: give --targets-file "
    "on the command line",
    "destroy-data": "a config file never authorises destroying data: give --destroy-data "
    "on the command line",
    "dry-run": "it is a way of running the command, not a setting: give --dry-run on the "
    "command line",
    "read-only": "it decides whether the target is written: give --read-only on the "
    "command line",
    "config": "config files do not include other config files",
    "print-config": "it is a way of running the command, not a setting",
    "help": "it is not a setting",
    "members": "a config file never chooses what is overwritten: give --members on the "
    "command line",
    "label": "it names this run (a controller, a cache setting): give --label on the "
    "command line",
}

@dataclass(frozen=True)
class ConfigFile:
    """A config file's settings for one suite, checked against its schema."""

    name: str  # the path as given, printable, for messages
    suite: str
    values: Mapping[str, Value]  # key (dashed) -> value of the key's kind

    def error(self, message: str) -> UserError:
        return config_error(self.name, message)


def config_error(name: str, message: str) -> UserError:
    return UserError(f"config {name}: {message}")


def printable(text: str) -> str:
    """``text`` itself if it prints on one line, else its repr."""
    return text if text and text.isprintable() else repr(text)


def show(value: object, depth: int = 0) -> str:
    """A value as a message shows it: short, on one line."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        if depth or len(value) > 4:
            return f"an array of {len(value)} items"
        return "[" + ", ".join(show(item, depth + 1) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int) and abs(value) > MAX_INTEGER:
        return f"a {len(str(abs(value)))}-digit number" if abs(value) < 10**4000 else "a number"
    if isinstance(value, str) and len(value) > _SHOWN_CHARS:
        return repr(value[:_SHOWN_CHARS]) + "..."
    if isinstance(value, int | float | str):
        return repr(value)
    return f"{type(value).__name__} {value}"  # TOML dates and times


# --------------------------------------------------------------------------- reading


Schemas = Mapping[str, Mapping[str, Kind]]


def parse_config(data: bytes, name: str, suite: str, schemas: Schemas) -> ConfigFile:
    """The settings in a config file's ``data`` for ``suite``; UserError (one line) if bad.

    ``name`` is the file's path: its suffix (.toml or .json) gives the format. ``schemas``
    holds every suite's keys (:func:`ssdlab.suites.config_schemas`).
    """
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    name = printable(name)
    if suite not in schemas:
        raise config_error(name, f"ssdlab run {suite} takes no config file")
    if suffix not in FORMATS:
        raise config_error(name, "give a .toml or .json file (the suffix says which)")
    if len(data) > MAX_CONFIG_BYTES:
        raise config_error(name, f"the file is larger than {MAX_CONFIG_BYTES // 1024} KiB; "
                           "a config file holds a few settings")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise config_error(name, f"not UTF-8 text (byte {data[exc.start]:#04x} at offset "
                           f"{exc.start})") from None
    document = _decode(text.removeprefix("\ufeff"), FORMATS[suffix], name)
    table = _suite_table(document, name, suite, schemas)
    return ConfigFile(name, suite, _check_keys(table, name, schemas[suite], suite))


def _decode(text: str, fmt: str, name: str) -> dict[str, Any]:
    try:
        document = tomllib.loads(text) if fmt == "TOML" else _json_object(text)
    except RecursionError:
        raise config_error(name, f"not valid {fmt}: nested too deeply") from None
    except ValueError as exc:  # TOMLDecodeError, JSONDecodeError, int() digit limits
        raise config_error(name, f"not valid {fmt}: {_one_line(str(exc))}") from None
    if not isinstance(document, dict):
        raise config_error(name, f"the file must hold a JSON object, not {show(document)}")
    return document


def _json_object(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_no_constant)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"key {show(key)} is given twice")
        result[key] = value
    return result


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a number a setting can take")


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 200 else line[:200] + "..."


def _suite_table(document: dict[str, Any], name: str, suite: str, schemas: Schemas
                 ) -> dict[str, Any]:
    """The settings: the document itself, or its one ``[suite]`` table."""
    tables = [key for key, value in document.items() if isinstance(value, dict)]
    suites = [key for key in tables if key in schemas]
    if len(suites) > 1:
        raise config_error(name, f"the file has tables for several suites ({', '.join(suites)}"
                           "); give one suite's settings per file")
    if not suites:
        if tables and _normal(tables[0]) not in schemas[suite]:
            raise config_error(name, f"[{printable(tables[0])}] is not a suite: give the "
                               f"settings at the top level or under [{suite}]")
        return document
    if len(document) > 1:
        raise config_error(name, f"settings outside the [{suites[0]}] table: give every "
                           f"setting under [{suites[0]}], or none under a table")
    if suites[0] != suite:
        raise config_error(name, f"the file is for the {suites[0]} suite ([{suites[0]}]), "
                           f"not {suite}")
    table: dict[str, Any] = document[suite]
    return table


def _normal(key: str) -> str:
    return key.replace("_", "-")


def _check_keys(table: dict[str, Any], name: str, schema: Mapping[str, Kind], suite: str
                ) -> dict[str, Value]:
    values: dict[str, Value] = {}
    spelled: dict[str, str] = {}
    for raw_key, value in table.items():
        key = _normal(raw_key)
        if key in COMMAND_LINE_ONLY:
            raise config_error(name, f"{printable(raw_key)} cannot be set in a config file: "
                               f"{COMMAND_LINE_ONLY[key]}")
        if key not in schema:
            raise config_error(name, _unknown(raw_key, key, schema, suite))
        if key in spelled:
            raise config_error(name, f"{key} is given twice (as {printable(spelled[key])} and "
                               f"{printable(raw_key)})")
        spelled[key] = raw_key
        values[key] = check_value(key, schema[key], value, name)
    return values


def _unknown(raw_key: str, key: str, schema: Mapping[str, Kind], suite: str) -> str:
    close = difflib.get_close_matches(key.lower(), schema, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else (
        f" (the keys are the long options of `{command()} run {suite} --help`)")
    return f"unknown key {show(raw_key)} for ssdlab run {suite}{hint}"


# --------------------------------------------------------------------------- values


def check_value(key: str, kind: Kind, value: object, name: str) -> Value:
    """``value`` as read from the file, checked to be of ``kind``."""
    checked: Value | None = _CHECKS[kind](value)
    if checked is None:
        raise config_error(name, f"{key} {show(value)} is not {kind.value}{_hint(kind, value)}")
    if isinstance(checked, str):
        _check_text(key, checked, name)
    return checked


def _hint(kind: Kind, value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return " (NaN and infinity are not allowed)"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
        return " (too large)"
    if kind in (Kind.INT, Kind.FLOAT) and isinstance(value, str):
        return " (numbers are written without quotes)"
    if kind is Kind.LIST and value == []:
        return " (the array is empty)"
    if kind is Kind.LIST and isinstance(value, list):
        return " (array items are numbers, or text without commas)"
    return ""


def _integer(value: object) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_INTEGER
    return value if ok else None  # type: ignore[return-value]


def _load(value: object) -> int | str | None:
    """--threads/--qd where ``auto`` is allowed (the load of a peak run, docs/peak.md)."""
    return "auto" if value == "auto" else _integer(value)


def _float(value: object) -> float | int | None:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return _integer(value)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _size(value: object) -> str | None:
    number = _integer(value)
    return str(number) if number is not None else _text(value)


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _list(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        return None
    items = []
    for item in value:
        number = _float(item)
        if isinstance(item, str) and "," not in item:
            items.append(item)
        elif number is not None:
            items.append(repr(number))
        else:
            return None
    return ",".join(items)


_CHECKS: dict[Kind, Callable[[object], Value | None]] = {
    Kind.INT: _integer, Kind.FLOAT: _float, Kind.TEXT: _text, Kind.SIZE: _size,
    Kind.LIST: _list, Kind.BOOL: _bool, Kind.LOAD: _load,
}


def _check_text(key: str, text: str, name: str) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise config_error(name, f"{key} {show(text)} is longer than {MAX_TEXT_CHARS} "
                           "characters")
    bad = next((c for c in text if unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is not None:
        raise config_error(name, f"{key} {show(text)} holds a control character "
                           f"(U+{ord(bad):04X})")


# --------------------------------------------------------------------------- writing


def toml_value(value: Value) -> str:
    """A value as TOML writes it (the effective settings ``--print-config`` prints)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return '"' + "".join(_toml_char(c) for c in value) + '"'


def _toml_char(char: str) -> str:
    if char in '"\\':
        return "\\" + char
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return f"\\u{ord(char):04X}"
    return char
