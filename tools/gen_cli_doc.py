"""Regenerate docs/cli.md from the argparse definitions (the --help texts)."""

from __future__ import annotations

import argparse
import io
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

from ssdlab.cli.main import build_parser

INTRO = """# Command line

Generated from `--help` by `tools/gen_cli_doc.py`; a test checks it is current.
Sizes: binary K/M/G/T (KiB, MiB, ...) or decimal KB/MB/GB/TB. Durations in seconds.
Exit codes: docs/exit-codes.md.
"""


def _help(parser: argparse.ArgumentParser) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        parser.print_help()
    return out.getvalue()


def _sections(parser: argparse.ArgumentParser, title: str, level: int) -> list[str]:
    """This command's help, then each subcommand's, one heading level deeper."""
    parts = [f"{'#' * level} {title}\n", "```text", _help(parser).rstrip(), "```\n"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                parts += _sections(child, f"{title} {name}", min(level + 1, 4))
    return parts


def render() -> str:
    os.environ["COLUMNS"] = "100"
    return "\n".join([INTRO, *_sections(build_parser(), "ssdlab", 2)])


if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
    target.write_text(render())
    sys.stdout.write(f"wrote {target}\n")
