"""docs/architecture.md's import rules, checked against every module of the package.

The rules are the "may import" column of the package table in docs/architecture.md: the
document is the single statement of them, and this test fails when the code and the
document disagree in either direction (a module importing what its package may not, a
package the table does not list, a rule naming nothing that exists). Every import counts
(tests/support/imports.py): at module level, in a function, under ``TYPE_CHECKING``, by
``importlib.import_module("literal")``, and the modules the registry loads by name.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.imports import (
    PACKAGE,
    REGISTRY,
    Import,
    Kind,
    imports_in,
    imports_of,
    module_name,
    modules,
    non_literal_imports,
    registry_imports,
)

DOC = PACKAGE.parents[1] / "docs" / "architecture.md"
EVERYTHING = "everything"
#: imports that break a rule, each until the work named moves it (issue 31): a rule
#: broken anywhere else fails, and so does one listed here that is gone
KNOWN: dict[tuple[str, str], str] = {}  # none left (WP5 moved the matrix to run/)


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


def _broken(path: Path) -> list[Import]:
    """The imports of the module at ``path`` its package may not make."""
    pkg = _package_of(path)
    if pkg == "__init__":
        return []
    may = rules()[pkg]
    return [i for i in imports_of(path, MODULE_NAMES) if i.name.startswith("ssdlab.")
            and not _allowed(i.name[len("ssdlab."):], pkg, may)]


MODULE_NAMES = sorted(modules())


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_rules(path: Path) -> None:
    name = module_name(path)
    bad = [i for i in _broken(path) if (name, i.module) not in KNOWN]
    may = rules().get(_package_of(path), set())
    assert not bad, (f"{_package_of(path)} may import only {sorted(may) or 'nothing'} of "
                     f"ssdlab: {', '.join(map(str, bad))}")


def test_the_known_broken_rules_are_still_broken() -> None:
    """A rule listed in KNOWN that the code keeps now: take it out of KNOWN."""
    paths = modules()
    broken = {(module, i.module) for module, _ in KNOWN for i in _broken(paths[module])}
    assert set(KNOWN) <= broken, f"kept now, out of KNOWN: {set(KNOWN) - broken}"


def test_modules_are_imported_by_name() -> None:
    """``import_module`` names its module as a literal (which the rules can read); the
    registry alone loads modules by a name it is given, its suites' (read from SUITES)."""
    found = {module_name(p): lines for p in MODULES if (lines := non_literal_imports(p))}
    assert set(found) <= {REGISTRY}, found


def _seen(source: str, module: str = "ssdlab.run.x") -> dict[str, Kind]:
    return {i.name: i.kind for i in imports_in(ast.parse(source), module.rsplit(".", 1)[0])}


def test_the_checker_sees_what_it_must() -> None:
    """The checker itself: an import at module level, in a function, under TYPE_CHECKING
    and by ``import_module`` counts, and so do the registry's modules."""
    assert _seen("import ssdlab.plan.pts\n"
                 "from ssdlab import units\n"
                 "from typing import TYPE_CHECKING\n"
                 "if TYPE_CHECKING:\n"
                 "    from ssdlab.report.html import Page\n"
                 "def f():\n"
                 "    from ssdlab.suites import find\n"
                 "    return importlib.import_module('ssdlab.report.pts_pages')\n"
                 "from . import session\n"
                 "import os\n") == {
        "ssdlab.plan.pts": Kind.TOP, "ssdlab.units": Kind.TOP,
        "ssdlab.report.html": Kind.TYPE_CHECKING, "ssdlab.suites": Kind.FUNCTION,
        "ssdlab.report.pts_pages": Kind.DYNAMIC, "ssdlab.run": Kind.TOP}
    assert non_literal_imports(PACKAGE / "suites.py")  # the registry's _module(...)
    registry = {i.module for i in registry_imports(
        ast.parse("SUITES = (Suite(a.SPEC, 'a_run', 'a_pages'), Suite(b, None, 'x.y'))"),
        [("a_run", "a_pages"), (None, "x.y")])}
    assert registry == {"ssdlab.run.a_run", "ssdlab.report.a_pages", "x.y"}
    names = {i.name for i in imports_of(PACKAGE / "cli" / "run_cmd.py")}
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
    report = {p.stem: {i.name for i in imports_of(p)}
              for p in sorted((PACKAGE / "report").glob("*.py"))}
    assert {m for m, names in report.items() if "ssdlab.suites" in names} == {"registry"}
    assert {m for m, names in report.items() if "ssdlab.report.registry" in names} \
        <= DISPATCHERS
    pages = {s.pages_module for s in SUITES if "." not in s.pages_module}
    assert pages and not pages & DISPATCHERS
    leaks = {m: sorted(names & {f"ssdlab.report.{d}" for d in DISPATCHERS})
             for m, names in report.items() if m in pages}
    assert not any(leaks.values()), leaks


def test_no_two_test_modules_share_a_name() -> None:
    """pytest imports test modules by their base name (the test directories are not
    packages): a second ``test_x.py`` in another directory is an "import file mismatch"
    error when both are collected in one run, as ``make test`` does (a VM lab module named
    like an integration one stopped a clean-clone run)."""
    tests = Path(__file__).resolve().parents[1]
    seen: dict[str, Path] = {}
    for path in sorted(tests.rglob("test_*.py")):
        assert path.name not in seen, f"{path} and {seen[path.name]} share a name"
        seen[path.name] = path
