"""Every suite's run uses the one shared skeleton (issue 31): its ``Runner.start`` is a
:class:`~ssdlab.run.session.SessionRun` subclass that says what differs through the
skeleton's hooks, never by a ``execute`` or ``resume`` of its own; nothing in run/ is
left to raise NotImplementedError; no ArgumentParser is subclassed to parse a suite's
options (the matrix reads its child suite's with ``SuiteSpec.option_values``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ssdlab.run.session import SessionRun
from ssdlab.suites import Suite, all_suites

SRC = Path(__file__).resolve().parents[2] / "src" / "ssdlab"
RUNNABLE = [s for s in all_suites() if s.run_module is not None]
#: the command line's own parser: its ``error`` is the command line's policy for usage
#: errors (one line, exit status 2), for every command and subcommand
PARSER_SUBCLASSES = {"cli/main.py": ["_Parser"]}


def _sources(root: Path) -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
            for path in sorted(root.rglob("*.py"))]


@pytest.mark.parametrize("suite", RUNNABLE, ids=lambda s: s.name)
def test_every_runs_start_is_the_shared_skeleton(suite: Suite) -> None:
    start = suite.runner().start
    assert isinstance(start, type) and issubclass(start, SessionRun), (
        f"{suite.name}: its Runner.start is {start!r}, not a SessionRun")
    for name in ("execute", "resume"):
        assert getattr(start, name) is getattr(SessionRun, name), (
            f"{start.__name__} overrides SessionRun.{name}: say what differs by a hook")


def test_there_is_a_runnable_suite_of_each_shape() -> None:
    names = {s.name for s in RUNNABLE}
    assert {"pts", "db", "aja", "matrix"} <= names  # the shapes the skeleton took in


def _raises_not_implemented(tree: ast.Module) -> list[int]:
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Name) and node.id == "NotImplementedError"]


def test_nothing_in_run_is_left_not_implemented() -> None:
    found = {str(path.relative_to(SRC)): lines for path, tree in _sources(SRC / "run")
             if (lines := _raises_not_implemented(tree))}
    assert found == {}


def _parser_subclasses(tree: ast.Module) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            name = base.attr if isinstance(base, ast.Attribute) else \
                base.id if isinstance(base, ast.Name) else ""
            if name == "ArgumentParser":
                out.append(node.name)
    return out


def test_no_argument_parser_is_subclassed_but_the_command_lines() -> None:
    found = {str(path.relative_to(SRC)): names for path, tree in _sources(SRC)
             if (names := _parser_subclasses(tree))}
    assert found == PARSER_SUBCLASSES


def test_the_checks_see_what_they_must() -> None:
    tree = ast.parse("import argparse\n"
                     "class P(argparse.ArgumentParser): pass\n"
                     "class Q(ArgumentParser): pass\n"
                     "def f() -> None:\n    raise NotImplementedError\n")
    assert _parser_subclasses(tree) == ["P", "Q"]
    assert _raises_not_implemented(tree) == [5]
    assert _parser_subclasses(ast.parse("class R(object): pass\n")) == []
