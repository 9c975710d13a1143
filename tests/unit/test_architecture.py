"""docs/architecture.md's import rules, checked against every module of the package.

The rules are the "may import" column of the package table in docs/architecture.md: the
document is the single statement of them, and this test fails when the code and the
document disagree in either direction (a module importing what its package may not, a
package the table does not list, a rule naming nothing that exists).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "ssdlab"
DOC = ROOT / "docs" / "architecture.md"
EVERYTHING = "everything"


def rules() -> dict[str, set[str]]:
    """Package (``plan``, ``errors`` ...) -> what it may import (``{"everything"}``)."""
    out: dict[str, set[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.fullmatch(r"`[a-z_]+/?`", cells[0]):
            continue
        name = cells[0].strip("`").rstrip("/")
        allowed = cells[2]
        if allowed == "-":
            continue  # not Python (the emulator)
        out[name] = {EVERYTHING} if allowed == EVERYTHING else set(
            re.findall(r"`([a-z_.]+)`", allowed))
    return out


def _package_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:``: imports for the type checker only."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(sub) for stmt in node.body for sub in ast.walk(stmt))
    return inside


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, ``ssdlab.x.y`` name) of every ssdlab import of a module, function-level too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "ssdlab":  # from ssdlab import x: x is the module
                yield from ((node.lineno, f"ssdlab.{a.name}") for a in node.names)
            else:
                yield node.lineno, node.module


def _allowed(target: str, pkg: str, may: set[str]) -> bool:
    """Whether package ``pkg`` may import ``ssdlab.<target>``."""
    if EVERYTHING in may or target in ("__version__", "units"):
        return True
    top = target.split(".", 1)[0]
    return top == pkg or top in may or any(
        target == rule or target.startswith(rule + ".") for rule in may)


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_package_has_a_rule() -> None:
    packages = {_package_of(p) for p in MODULES} - {"__init__"}
    documented = set(rules())
    assert packages <= documented, f"no rule in docs/architecture.md for {packages - documented}"
    assert documented <= packages, f"rules for what does not exist: {documented - packages}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_rules(path: Path) -> None:
    pkg = _package_of(path)
    if pkg == "__init__":
        return
    may = rules()[pkg]
    bad = [f"line {line}: {name}" for line, name in imports_of(path)
           if name.startswith("ssdlab.") and not _allowed(name[len("ssdlab."):], pkg, may)]
    assert not bad, f"{pkg} may import only {sorted(may) or 'nothing'} of ssdlab: {bad}"


def test_the_checker_sees_what_it_must() -> None:
    """The checker itself: a function-level import counts, a TYPE_CHECKING one does not."""
    source = PACKAGE / "cli" / "run_cmd.py"
    names = {name for _, name in imports_of(source)}
    assert "ssdlab.cli" in names and "ssdlab.suites" in names  # the latter inside a function
    assert not _allowed("report.html", "run", rules()["run"])
    assert _allowed("units", "targets", rules()["targets"])  # every package may
    assert not _allowed("plan.specs", "targets", rules()["targets"])
    assert not _allowed("plan.pts", "targets", rules()["targets"])


#: the report modules that find a run's pages through ``report/registry.py`` (the
#: dispatchers, docs/architecture.md); a suite's pages module is none of them
DISPATCHERS = {"registry", "run_pages", "terminal", "build", "compare_pages"}


def test_only_the_dispatchers_reach_the_registry_and_no_pages_module_imports_them() -> None:
    """No import loop between the registry and the pages modules it loads: in report/,
    only registry.py imports ``ssdlab.suites``, only the dispatchers import registry.py,
    and no registered pages module imports a dispatcher."""
    from ssdlab.suites import SUITES
    report = {p.stem: {name for _, name in imports_of(p)}
              for p in sorted((PACKAGE / "report").glob("*.py"))}
    assert {m for m, names in report.items() if "ssdlab.suites" in names} == {"registry"}
    assert {m for m, names in report.items() if "ssdlab.report.registry" in names} \
        <= DISPATCHERS
    pages = {s.pages_module for s in SUITES if "." not in s.pages_module}
    assert pages and not pages & DISPATCHERS
    leaks = {m: sorted(names & {f"ssdlab.report.{d}" for d in DISPATCHERS})
             for m, names in report.items() if m in pages}
    assert not any(leaks.values()), leaks
