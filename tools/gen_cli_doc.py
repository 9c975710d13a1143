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


def render() -> str:
    os.environ["COLUMNS"] = "100"
    parser = build_parser()
    parts = [INTRO, "## ssdlab\n", "```text", _help(parser).rstrip(), "```\n"]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, child in sub.choices.items():
        parts += [f"## ssdlab {name}\n", "```text", _help(child).rstrip(), "```\n"]
    return "\n".join(parts)


if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
    target.write_text(render())
    sys.stdout.write(f"wrote {target}\n")
