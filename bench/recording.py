"""What a benchmark records of where it ran: no absolute path of the machine.

A recorded result (bench/results/) must read the same whichever checkout, user or
temporary directory produced it: paths are relative to the repository (or left out),
programs are named as one types them (``fio``, not ``/usr/bin/fio``), temporary files by
a placeholder (``STORE``). tests/unit/test_bench_results.py checks every recorded file.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def repo_path(path: Path | str) -> str | None:
    """``path`` relative to the repository (``bench/results``), None when outside it."""
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None


def recorded_args(args: argparse.Namespace) -> dict[str, Any]:
    """The options as parsed, paths relative to the repository (None outside it)."""
    return {key: repo_path(value) if isinstance(value, Path) else value
            for key, value in vars(args).items()}


def program_name(path: str) -> str:
    """A program by its name (``/usr/bin/chromium-headless-shell`` ->
    ``chromium-headless-shell``)."""
    return Path(path).name


def command_as_typed(command: Sequence[str], placeholders: Mapping[str, str]) -> list[str]:
    """``command`` with its program by name and each argument found in ``placeholders``
    (a machine's path) replaced by its stand-in (``{"/tmp/x/store.sqlite": "STORE",
    "/usr/bin/fio": "fio"}``)."""
    program, *rest = command
    return [program_name(program), *(placeholders.get(arg, arg) for arg in rest)]


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ("" when it says none)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next((line.split(":", 1)[1].strip() for line in lines
                 if line.startswith("model name")), "")


def write_results(results_dir: Path, name: str, doc: Mapping[str, Any], text: str) -> None:
    """A benchmark's recorded result: ``NAME.json`` (``doc``) and ``NAME.md`` (``text``,
    also printed)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (results_dir / f"{name}.md").write_text(text)
    print(text)
