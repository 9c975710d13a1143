"""Fuzzing the config loader: input strategies and the outcome oracle.

Shared by tests/unit/test_config.py (a few hundred inputs in ``make test``) and
``tools/fuzz.py config`` (as many as asked). An input is a suite and a config file (name
and bytes); it goes the whole way a config file goes before any I/O: read and checked
against the schema (:func:`ssdlab.plan.config_schema.parse_config`), merged under a
command line and converted by the options' argparse types and choices
(:class:`ssdlab.cli.config_opts.ConfiguredCommand`), then the suite's own command runs
with ``--dry-run`` on a planned 1 GiB test file (its target identification replaced:
no fio, no filesystem), which validates everything and renders every fio job file. The
only allowed outcomes are acceptance or a :class:`~ssdlab.errors.UserError` with a
one-line message and exit code 2 (or 3, the test file too small for the settings); an
accepted file's ``--print-config`` output must read back to the same settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import io
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from ssdlab.cli.config_opts import ConfiguredCommand, blame_file
from ssdlab.cli.main import build_parser
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.config_schema import (
    COMMAND_LINE_ONLY,
    MAX_CONFIG_BYTES,
    ConfigFile,
    Kind,
    parse_config,
)
from ssdlab.run.prepare import PreparedTarget
from ssdlab.suites import config_schemas
from tests.support.prepared import file_info

GIB = 1 << 30
SCHEMAS = config_schemas()
CPUS = 2


# --------------------------------------------------------------------------- the oracle


def suite_parsers() -> dict[str, argparse.ArgumentParser]:
    """``ssdlab run SUITE``'s parser, by suite."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = commands.choices["run"]
    suites = next(a for a in run._actions if isinstance(a, argparse._SubParsersAction))
    return dict(suites.choices)


@functools.cache
def _bare(suite: str) -> tuple[argparse.Namespace, ConfiguredCommand]:
    args = build_parser().parse_args(["run", suite, "--target", "fuzz.img"])
    assert isinstance(args.func, ConfiguredCommand)
    return args, args.func


def _planned_file(*_args: Any, **_kwargs: Any) -> PreparedTarget:
    """prepare_target for a 1 GiB test file ssdlab would create: no fio, no filesystem."""
    info = dataclasses.replace(file_info(Path("/fuzz/target.img"), GIB, 512),
                               details={"planned": True})
    return PreparedTarget(info, True, {"hostname": "fuzz", "cpu_count": CPUS},
                          {"ssdlab": "fuzz", "fio": "fio-3.33"})


@contextmanager
def _no_target() -> Iterator[None]:
    """Every suite's prepare_target replaced by :func:`_planned_file`, for a while."""
    modules = [m for name, m in list(sys.modules.items())
               if name.startswith("ssdlab.run.") and hasattr(m, "prepare_target")]
    saved = [(m, m.prepare_target) for m in modules]
    try:
        for module in modules:
            module.prepare_target = _planned_file  # type: ignore[attr-defined]
        yield
    finally:
        for module, original in saved:
            module.prepare_target = original  # type: ignore[attr-defined]


def dry_run(command: ConfiguredCommand, ns: argparse.Namespace) -> str:
    """The suite's own command with --dry-run on a planned file: what it would print."""
    ns.dry_run = True
    out = io.StringIO()
    with _no_target(), redirect_stdout(out):
        assert command.command(ns, []) == 0
    assert out.getvalue().startswith("DRY RUN"), out.getvalue()[:200]
    return out.getvalue()


def _clean(exc: UserError, codes: tuple[ExitCode, ...] = (ExitCode.USAGE,)) -> None:
    message = exc.message
    assert exc.exit_code in codes, (exc.exit_code, message)
    assert message and message == message.strip(), repr(message)
    assert len(message.splitlines()) == 1 and "\n" not in message, repr(message)


def _merged(suite: str, config: ConfigFile) -> tuple[argparse.Namespace, dict[str, str]]:
    bare, command = _bare(suite)
    ns = argparse.Namespace(**vars(bare))
    return ns, command.merge(ns, config)


def check_config_outcome(suite: str, name: str, data: bytes) -> str:
    """'refused by the loader', 'refused by the suite' or 'accepted'; anything else raises."""
    try:
        config = parse_config(data, name, suite, SCHEMAS)
        ns, sources = _merged(suite, config)
    except UserError as exc:
        _clean(exc)
        return "refused by the loader"
    _, command = _bare(suite)
    from_file = {k for k, source in sources.items() if source.startswith("config ")}
    try:
        dry_run(command, argparse.Namespace(**vars(ns)))
    except UserError as exc:  # a bad value (2), or the test file too small for it (3)
        _clean(exc, (ExitCode.USAGE, ExitCode.TARGET))
        _clean(blame_file(exc, config, from_file), (ExitCode.USAGE, ExitCode.TARGET))
        return "refused by the suite"
    _check_round_trip(suite, command, ns, sources)
    return "accepted"


def _check_round_trip(suite: str, command: ConfiguredCommand, ns: argparse.Namespace,
                      sources: dict[str, str]) -> None:
    """``--print-config`` of accepted settings reads back to the same settings."""
    text = command.render(ns, sources)
    again, _ = _merged(suite, parse_config(text.encode(), "printed.toml", suite, SCHEMAS))
    for setting in command.settings:
        before, after = getattr(ns, setting.dest), getattr(again, setting.dest)
        assert before == after, (setting.key, before, after, text)


# --------------------------------------------------------------------------- inputs

PARSERS = suite_parsers()
SUITES = sorted(SCHEMAS)
ALL_KEYS = sorted({key for schema in SCHEMAS.values() for key in schema} | set(COMMAND_LINE_ONLY))
PLAUSIBLE_TEXT = [
    "", "quick", "default", "snia", "review", "reviews", "v1.1", "v2.0", "auto", "none",
    "blkdiscard", "libaio", "io_uring", "io", "bw", "iops,latency", "iops,iops", "4,64",
    "4,4", "0.5", "4k,512b", "1024,128,4,0.5", "65/35", "100/0,65/35,0/100", "60/30",
    "70/20", "1,2,4", "8,4", "1,2,4,8,16,32", "0,20,40", "10,10", "5,10,15,25,50", "5,5",
    "1GiB", "256MiB", "16MiB", "1MiB", "0", "-1", "1e3", "nan", "inf", "²", "١", "½",
    "1 parsec", "1ZB", "128", "1m", "4,", ",", " ", "\u00a0", "9" * 30, "x" * 50,
]


#: items of comma lists (block sizes, mixes, counts, tests, waits, OP settings)
LIST_PARTS = ["²", "١", "½", "0", "-1", "1", "2", "4", "8", "32", "64", "0.5", "4k", "512b",
              "700b", "65/35", "100/0", "0/100", "60/30", "65/35/0", "nan", "inf", "", " ",
              "1e3", "9" * 30, "iops", "latency", "throughput", "10%", "90", "91"]
#: what numbers, sizes, mixes and lists are made of, and look-alikes (², ١, ½, NBSP)
NUMERIC_CHARS = "0123456789,,,./-+eEkKmMgGiIbBtT%² ١½\u00a0\t"


class Raw(str):
    """A value written into the document as is (huge numbers, TOML dates)."""


RAW_TOKENS = ["9" * 5000, "-" + "9" * 4400, "1e400", "-1e400", "0x7fffffffffffffff",
              "1979-05-27", "07:32:00", "1979-05-27T07:32:00Z", "1e-400", "-0.0",
              "9223372036854775808", "-9223372036854775809"]

keys = st.one_of(
    st.sampled_from(ALL_KEYS),
    st.sampled_from(ALL_KEYS).map(lambda k: k.replace("-", "_")),
    st.sampled_from(ALL_KEYS).map(lambda k: k.upper()),
    st.sampled_from(ALL_KEYS).map(lambda k: k[:-1]),
    st.text(max_size=12),
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 5000),
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
    st.sampled_from(PLAUSIBLE_TEXT), st.text(max_size=20),
    st.sampled_from(RAW_TOKENS).map(Raw),
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children,
                                                                     max_size=4),
    max_leaves=12,
)


def _kind_values(suite: str, key: str) -> st.SearchStrategy[Any]:
    """Values near what ``key`` takes: the right type, edge values, choices."""
    kind = SCHEMAS[suite][key]
    action = PARSERS[suite]._option_string_actions[f"--{key}"]
    choices = st.sampled_from(sorted(action.choices)) if action.choices else st.nothing()
    whole = st.integers(-2, 300) | st.sampled_from([0, 1, 2, 4, 5, 8, 16, 32, 100, 128, 256,
                                                    1000, 4096, 5000, 100_000, 2**63 - 1])
    numbers = whole | st.floats(-10, 1e4) | st.sampled_from(
        [0.05, 0.1, 0.5, 1.5, 99.9, 100.0, 1e-9, 1e-4, 1e300, 1e308, math.nan, math.inf,
         -math.inf])
    texts = st.sampled_from(PLAUSIBLE_TEXT) | st.text(NUMERIC_CHARS, max_size=12)
    list_texts = st.lists(st.sampled_from(LIST_PARTS) | st.integers(0, 300).map(str),
                          max_size=5).map(",".join)
    by_kind: dict[Kind, st.SearchStrategy[Any]] = {
        Kind.INT: whole, Kind.FLOAT: numbers, Kind.BOOL: st.booleans(),
        Kind.TEXT: choices | choices | texts, Kind.SIZE: texts | st.integers(-1, 1 << 42),
        Kind.LIST: list_texts | list_texts | texts | st.lists(numbers | texts, max_size=6),
        Kind.LOAD: whole | st.sampled_from(["auto", "Auto", "auto "]),
    }
    right = by_kind[kind]
    return st.one_of(*[right] * 12, scalars)


@st.composite
def _settings(draw: st.DrawFn, suite: str) -> dict[str, Any]:
    """Mostly the suite's own keys with values near their kind; some strangers."""
    doc: dict[str, Any] = {}
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 2, 3, 4, 5]))):
        if draw(st.integers(0, 19)):
            key = draw(st.sampled_from(sorted(SCHEMAS[suite])))
            doc[draw(st.sampled_from([key, key, key.replace("-", "_")]))] = draw(
                _kind_values(suite, key))
        else:
            doc[draw(keys)] = draw(values)
    return doc


def toml_text(doc: dict[str, Any], table: str | None) -> str:
    """A document as TOML (any value, including NaN and huge numbers, as written)."""
    lines = [f"[{_toml_key(table)}]"] if table is not None else []
    lines += [f"{_toml_key(k)} = {_toml(v)}" for k, v in doc.items() if v is not None]
    return "\n".join(lines) + "\n"


def _toml_key(key: str) -> str:
    return _toml_string(key)


def _toml_string(text: str) -> str:
    """A basic string; JSON's escapes are TOML's (no surrogate pairs: non-ASCII as is)."""
    return json.dumps(text, ensure_ascii=False)


def _toml(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(
            value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value if v is not None) + "]"
    items = (f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items() if v is not None)
    return "{" + ", ".join(items) + "}"


def json_text(doc: dict[str, Any], table: str | None) -> str:
    text = _json(doc)
    return '{"' + table.replace('"', "") + '": ' + text + "}" if table is not None else text


def _json(value: Any) -> str:
    if isinstance(value, Raw):  # numbers as is; TOML's dates as text
        return str(value) if value[-1:].isdigit() and "-" not in value[1:] else json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json(v) for v in value) + "]"
    return json.dumps(value)


@st.composite
def _mutated(draw: st.DrawFn, text: str) -> str:
    """Text edits: truncation, insertions, a repeated line, stray characters."""
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["cut", "insert", "repeat", "delete"]))
        if action == "cut":
            text = text[:where]
        elif action == "insert":
            text = text[:where] + draw(st.sampled_from(
                ["[", "]", "{", "}", '"', "'", "=", ",", "\n", "#", "\\", "\x00", "\ufeff",
                 "[pts]\n", "[[pts]]\n", "a.b = 1\n", "\u2028", "\r"]) | st.text(max_size=4)
            ) + text[where:]
        elif action == "repeat" and text:
            lines = text.splitlines(keepends=True)
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(lines)))
            text = "".join(lines)
        else:
            text = text[:where] + text[where + draw(st.integers(1, 5)):]
    return text


@st.composite
def config_documents(draw: st.DrawFn) -> tuple[str, str, bytes]:
    """(suite, file name, bytes): structured TOML/JSON configs, mutated, or raw bytes."""
    suite = draw(st.sampled_from(SUITES))
    fmt = draw(st.sampled_from(["toml", "json"]))
    other = "json" if fmt == "toml" else "toml"
    name = draw(st.sampled_from([f"run.{fmt}"] * 76 + [f"RUN.{fmt.upper()}", "run.yaml", "run",
                                                       f"run.{other}"]))
    shape = draw(st.integers(0, 39))
    if shape == 0:
        return suite, name, draw(st.binary(max_size=200))
    if shape == 1:
        depth = draw(st.integers(1, 5000))
        body = draw(st.sampled_from(["[" * depth, "a = " + "[" * depth + "]" * depth,
                                     "{" * depth, '{"a": ' * depth + "1" + "}" * depth,
                                     "a = " + "{b = " * depth + "1" + "}" * depth]))
        return suite, name, body.encode()
    if shape == 2:
        return suite, name, b"#" * draw(st.sampled_from([MAX_CONFIG_BYTES, MAX_CONFIG_BYTES
                                                         + 1]))
    table = draw(st.sampled_from([None] * 10 + [suite] * 8 + [draw(st.sampled_from(SUITES)),
                                                               "run"]))
    doc = draw(_settings(suite))
    text = (toml_text if fmt == "toml" else json_text)(doc, table)
    if draw(st.integers(0, 9)) == 0:
        text = draw(_mutated(text))
    encoding = draw(st.sampled_from(["utf-8"] * 57 + ["utf-8-sig", "utf-16", "latin-1"]))
    return suite, name, text.encode(encoding, errors="surrogatepass" if encoding == "utf-8"
                                    else "replace")
