"""The documentation stays true: generated CLI docs are current, exit codes documented."""

from __future__ import annotations

import argparse
import io
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from ssdlab.cli.main import build_parser
from ssdlab.errors import ExitCode
from ssdlab.plan.peak import DEFAULT_ENGINES, HIPRI_ENGINE
from tools.gen_cli_doc import render

ROOT = Path(__file__).resolve().parents[2]


def test_cli_doc_is_generated_from_current_help() -> None:
    assert (ROOT / "docs" / "cli.md").read_text() == render(), (
        "docs/cli.md is stale: run .venv/bin/python tools/gen_cli_doc.py")


def test_every_exit_code_is_documented_in_docs_and_help() -> None:
    doc = (ROOT / "docs" / "exit-codes.md").read_text()
    out = io.StringIO()
    with redirect_stdout(out):
        build_parser().print_help()
    for code in ExitCode:
        assert re.search(rf"^\| +{int(code)} \|", doc, re.M), code
        assert re.search(rf"^  {int(code)} ", out.getvalue(), re.M), code


def test_readme_shows_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme


def _sub_help(monkeypatch: pytest.MonkeyPatch, columns: int, *path: str) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser.format_help()


@pytest.mark.parametrize("columns", [60, 80, 100, 132])
def test_help_wraps_between_names_never_inside_one(monkeypatch: pytest.MonkeyPatch,
                                                   columns: int) -> None:
    """issue 30: `run peak --help` wrapped inside an engine name ("registerfil es")."""
    text = _sub_help(monkeypatch, columns, "run", "peak")
    words = set(text.split())
    for engine in (*DEFAULT_ENGINES, HIPRI_ENGINE):
        assert engine in words or f"{engine}," in words, (engine, text)


def test_a_qd_auto_help_says_auto_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 30: `run atto --help`'s --qd repeated "auto:"."""
    for suite in ("atto", "iometer", "pts"):
        text = _sub_help(monkeypatch, 100, "run", suite)
        qd = text[text.index("\n  --qd N|auto"):]
        qd = qd[:qd.index("\n  --", 1)]
        assert qd.count("auto:") == 1, qd
