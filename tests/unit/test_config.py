"""Config files: the schema matches the parsers, precedence, print-config round trip, fuzz."""

from __future__ import annotations

import argparse
import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ssdlab.cli.config_opts import ConfiguredCommand
from ssdlab.cli.main import build_parser
from ssdlab.errors import ExitCode, UserError
from ssdlab.plan.config_schema import COMMAND_LINE_ONLY, Kind, parse_config
from ssdlab.suites import config_schemas
from tests.support.config_fuzz import (
    check_config_outcome,
    config_documents,
    suite_parsers,
)

SCHEMAS = config_schemas()
ROOT = Path(__file__).resolve().parents[2]
PARSERS = suite_parsers()


def refused(data: bytes | str, name: str = "run.toml", suite: str = "pts") -> str:
    raw = data.encode() if isinstance(data, str) else data
    with pytest.raises(UserError) as info:
        parse_config(raw, name, suite, SCHEMAS)
    assert info.value.exit_code is ExitCode.USAGE
    message = info.value.message
    assert message.startswith(f"config {name}: ") and len(message.splitlines()) == 1
    return message


# --------------------------------------------------------------------------- the schema


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s[2:]: a for a in parser._actions for s in a.option_strings if s.startswith("--")}


def test_every_suite_has_a_schema_and_the_config_options() -> None:
    assert sorted(PARSERS) == sorted(SCHEMAS)
    for parser in PARSERS.values():
        assert {"config", "print-config"} <= set(_options(parser))


@pytest.mark.parametrize("suite", sorted(SCHEMAS))
def test_schema_covers_every_option_and_nothing_else(suite: str) -> None:
    options = _options(PARSERS[suite])
    assert set(SCHEMAS[suite]) == set(options) - set(COMMAND_LINE_ONLY), (
        "a new option needs a decision: a key of plan/config_schema.py, or COMMAND_LINE_ONLY")
    for key, kind in SCHEMAS[suite].items():
        action = options[key]
        if kind is Kind.BOOL:
            assert action.nargs == 0, key
        else:
            expected = {Kind.INT: int, Kind.FLOAT: float}.get(kind)
            if expected is not None or action.type in (int, float):
                assert action.type is expected, key
            assert action.nargs is None, key
        if action.choices is not None:
            assert kind is Kind.TEXT, key


def test_docs_list_every_key_of_every_suite() -> None:
    doc = (ROOT / "docs" / "config.md").read_text()
    for suite, schema in SCHEMAS.items():
        section = doc.split(f"### {suite}\n", 1)[1].split("\n### ", 1)[0]
        missing = [key for key in schema if f"`{key}`" not in section]
        assert not missing, (suite, missing)
        for key, action in _options(PARSERS[suite]).items():
            if key in schema and action.choices is not None:
                row = next(line for line in section.splitlines()
                           if line.startswith(f"| `{key}` |"))
                assert all(f"`{c}`" in row for c in action.choices), (suite, key, row)
    for key in COMMAND_LINE_ONLY:
        assert f"`{key}`" in doc or key == "help", key


# --------------------------------------------------------------------------- reading


def test_toml_and_json_give_the_same_values() -> None:
    toml = parse_config(b'profile = "quick"\nblock_sizes = [4, 0.5]\nmax-rounds = 8\n'
                        b"no-precondition = true\nsize = 1073741824\n", "a.toml", "pts", SCHEMAS)
    as_json = parse_config(json.dumps({"pts": {"profile": "quick", "block-sizes": "4,0.5",
                                                "max-rounds": 8, "no-precondition": True,
                                                "size": "1073741824"}}).encode(),
                           "a.JSON", "pts", SCHEMAS)
    assert toml.values == as_json.values == {
        "profile": "quick", "block-sizes": "4,0.5", "max-rounds": 8, "no-precondition": True,
        "size": "1073741824"}


@pytest.mark.parametrize(("text", "needle"), [
    ('max-rounds = "x"', "max-rounds 'x' is not a whole number"),
    ("max_round = 8", "unknown key 'max_round' for ssdlab run pts (did you mean 'max-rounds'?)"),
    ("round-seconds = inf", "round-seconds inf is not a number (NaN and infinity"),
    ("max-rounds = 2.0", "max-rounds 2.0 is not a whole number"),
    ("max-rounds = 9223372036854775808", "a 19-digit number is not a whole number (too large)"),
    ("threads = \"max\"", "threads 'max' is not a whole number or \"auto\""),
    ("block-sizes = [4, [8]]", "block-sizes [4, an array of 1 items] is not a list"),
    ("block-sizes = ['4,8']", "(array items are numbers, or text without commas)"),
    ("mixes = [true]", "mixes [true] is not a list"),
    ("[pts]\nprofile = 'quick'\n[saturation]\nbursts = 1", "tables for several suites"),
    ("profile = 'quick'\n[pts]\nqd = 1", "settings outside the [pts] table"),
    ('fio = "a\\u0085b"', "control character (U+0085)"),
    ("fio = '" + "x" * 5000 + "'", "longer than 4096 characters"),
    ("a = [" * 2000 + "]" * 2000, "not valid TOML"),
])
def test_refusals_name_the_key_and_what_is_allowed(text: str, needle: str) -> None:
    assert needle in refused(text)


def test_a_config_for_another_suite_or_format_is_refused() -> None:
    assert "for the slc-probe suite" in refused("[slc-probe]\nqd = 4")
    assert "give a .toml or .json file" in refused("qd = 4", name="run.ini")
    assert "give a .toml or .json file" in refused("qd = 4", name="toml")
    assert "unknown key 'log'" in refused("log = 'io'")  # an slc-probe key, not a pts one
    assert "no-hir" in refused('{"no-hir": true}', name="x.json", suite="op-sweep")


# --------------------------------------------------------------------------- precedence


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def invoke(argv: list[str]) -> tuple[argparse.Namespace, str]:
    """Run ``ssdlab ARGV`` up to the suite's command, which is replaced by a recorder."""
    args = parse(argv)
    seen: list[argparse.Namespace] = []

    def record(ns: argparse.Namespace, _argv: list[str]) -> int:
        seen.append(ns)
        return 0

    command = args.func
    assert isinstance(command, ConfiguredCommand)
    out = io.StringIO()
    with redirect_stdout(out):
        ConfiguredCommand(command.suite, command.settings, record)(args, argv)
    return (seen[0] if seen else args), out.getvalue()


def test_command_line_overrides_the_file_which_overrides_defaults(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text('profile = "quick"\nmax-rounds = 8\nqd = 2\nno-precondition = true\n')
    args, _ = invoke(["run", "pts", "--target", "t", "--config", str(config), "--qd", "4"])
    assert (args.profile, args.max_rounds, args.qd, args.precondition) == ("quick", 8, 4, False)
    assert (args.variant, args.purge, args.threads, args.fio) == ("snia", "auto", None, "fio")
    plain, _ = invoke(["run", "pts", "--target", "t"])
    assert (plain.profile, plain.max_rounds, plain.precondition) == ("default", None, True)


def test_file_values_go_through_the_option_types(tmp_path: Path) -> None:
    config = tmp_path / "run.json"
    config.write_text('{"write-size": "1GiB", "slice": 8388608, "store": "r.sqlite"}')
    args, _ = invoke(["run", "slc-probe", "--target", "t", "--config", str(config)])
    assert (args.write_size, args.slice, args.store) == (1 << 30, 8 << 20, "r.sqlite")


def test_a_suite_refusal_of_a_file_value_names_the_file(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text("max-rounds = 3\n")
    args = parse(["run", "op-sweep", "--target", "t", "--config", str(config)])

    def build(ns: argparse.Namespace, _argv: list[str]) -> int:
        raise UserError(f"--max-rounds {ns.max_rounds} is smaller than the window")

    command = ConfiguredCommand(args.func.suite, args.func.settings, build)
    with pytest.raises(UserError) as info:
        command(args, [])
    assert info.value.message == f"config {config}: max-rounds 3 is smaller than the window"
    given = parse(["run", "op-sweep", "--target", "t", "--config", str(config),
                   "--max-rounds", "2"])
    with pytest.raises(UserError) as info:
        command(given, [])
    assert info.value.message == "--max-rounds 2 is smaller than the window"


@pytest.mark.parametrize("suite", sorted(SCHEMAS))
def test_print_config_reads_back_to_the_same_settings(suite: str, tmp_path: Path) -> None:
    sized = "size" in _options(PARSERS[suite])
    target = (["--members", "a,b"] if suite == "matrix" else
              ["--target", "t", *(["--size", "1GiB"] if sized else [])])
    argv = ["run", suite, *target, "--print-config"]
    first, text = invoke(argv)
    assert re.search(rf"^\[{suite}\]$", text, re.M)
    saved = tmp_path / "saved.toml"
    saved.write_text(text)
    again, text_again = invoke([*argv[:-1], "--config", str(saved), "--print-config"])
    assert text_again.split("\n", 3)[3] == text.split("\n", 3)[3].replace(
        "# default", f"# config {saved}")
    for key in SCHEMAS[suite]:
        dest = PARSERS[suite]._option_string_actions[f"--{key}"].dest
        assert getattr(first, dest) == getattr(again, dest), key


# --------------------------------------------------------------------------- fuzz

FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(config_documents())
def test_fuzz_structured_configs(document: tuple[str, str, bytes]) -> None:
    check_config_outcome(*document)


@FUZZ
@given(st.sampled_from(sorted(SCHEMAS)), st.sampled_from(["a.toml", "a.json"]), st.binary())
def test_fuzz_random_bytes(suite: str, name: str, data: bytes) -> None:
    check_config_outcome(suite, name, data)


def test_outcome_checker_catches_other_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.support.config_fuzz as harness

    def boom(*_: Any) -> Any:
        raise KeyError("bug")

    monkeypatch.setattr(harness, "parse_config", boom)
    with pytest.raises(KeyError):
        check_config_outcome("pts", "a.toml", b"")


def test_file_names_that_do_not_print_are_quoted() -> None:
    config = parse_config(b"qd = 4", "my\tfile.toml", "pts", SCHEMAS)
    assert config.name == repr("my\tfile.toml") and config.values == {"qd": 4}
    name = "a\nb.toml"
    with pytest.raises(UserError) as info:
        parse_config(b"qd = 'x'", name, "pts", SCHEMAS)
    assert info.value.message.startswith(f"config {name!r}: qd 'x' is not a whole number")
