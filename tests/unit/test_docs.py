"""The documentation stays true: generated CLI docs are current, exit codes documented."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from pathlib import Path

from ssdlab.cli.main import build_parser
from ssdlab.errors import ExitCode
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
