"""Issue 31's goals for the shape of the code (docs: /work/notes/issue31-plan.md §1):
each is a test, marked as an expected failure (strict) until the work package that
reaches it removes its mark. Strict: a goal reached with its mark still on fails, so
the mark comes off in the same change. Each mark expects an AssertionError only: a
checker that breaks fails at once instead of passing for an expected failure.

* at most 60 lines in src/ name ``dict[str, Any]`` (228 on 84b2068);
* no module in src/ is longer than 600 lines (9 were);
* plan/pts.py is imported only by the PTS suite's own modules and the registry (reached:
  WP1b and WP2);
* no suite is named in shared code: reached (WP2), tests/unit/test_suite_names.py;
* none of the dead code the issue names is there.

The checkers themselves are tested here too (without a mark): each finds what it must.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.support.suite_names import module_constants, own_modules

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "ssdlab"
MAX_DICT_ANY = 60
MAX_LINES = 600
PTS_MODULE = "ssdlab.plan.pts"
#: the dead code of the issue: module -> names it must not define
DEAD = {
    "ssdlab.targets.array_status": (
        "parse_mdadm_detail", "MdDetail", "MdMember", "_detail_sections", "_member_row",
        "_count", "_kib_field", "_detail_progress", "_first_word", "_md_detail_health"),
    "ssdlab.report.suite": ("failed_tests",),
    "ssdlab.report.pts_pages": ("_cells_by_name",),
    "ssdlab.analysis.predict": ("CurveFit.gradient",),
    # the re-exports "for older imports" (the module goes: plan/pts.py takes the suite)
    "ssdlab.plan.options": ("IOENGINES", "PURGE_METHODS"),
}
GOAL = pytest.mark.xfail(strict=True, raises=AssertionError,
                         reason="issue 31: a goal not reached yet")


def modules() -> Iterator[tuple[str, Path]]:
    """(dotted name, path) of every module of the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


# -- the checkers ----------------------------------------------------------------------------


def dict_any_lines(paths: Iterable[Path]) -> list[str]:
    """``path:line`` of every line naming ``dict[str, Any]`` (as grep counts them)."""
    return [f"{path}:{number}" for path in paths
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if "dict[str, Any]" in line]


def long_modules(paths: Iterable[Path], limit: int = MAX_LINES) -> dict[str, int]:
    """Modules longer than ``limit`` lines (as ``wc -l`` counts them) -> their length."""
    lengths = {str(p): p.read_text(encoding="utf-8").count("\n") for p in paths}
    return {path: n for path, n in lengths.items() if n > limit}


def imported(tree: ast.AST) -> Iterator[str]:
    """Every module an AST imports, at any level (function bodies, TYPE_CHECKING) and by
    ``importlib.import_module("literal")``: ``from a import b`` gives ``a`` and ``a.b``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and ast.unparse(node.func) in ("importlib.import_module", "import_module",
                                             "__import__")):
            yield node.args[0].value


def importers_of(target: str, sources: Mapping[str, ast.AST]) -> set[str]:
    return {name for name, tree in sources.items() if name != target
            and target in set(imported(tree))}


def defined(tree: ast.Module) -> set[str]:
    """Names a module defines: top-level functions, classes and assignments (imported
    names too), and ``Class.method``."""
    out: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(stmt.name)
        if isinstance(stmt, ast.ClassDef):
            out.update(f"{stmt.name}.{item.name}" for item in stmt.body
                       if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef))
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            out.update((alias.asname or alias.name).split(".")[0] for alias in stmt.names)
        else:
            out.update(name for name, _, _ in module_constants(ast.Module([stmt], [])))
    return out


# -- what the package is now ------------------------------------------------------------------


@pytest.fixture(scope="module")
def sources() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in modules()}


def pts_suite_modules() -> set[str]:
    return own_modules()["pts"] | {"ssdlab.suites"}


# -- the goals ---------------------------------------------------------------------------------


def test_dict_str_any_is_named_on_at_most_60_lines() -> None:
    lines = dict_any_lines(path for _, path in modules())
    assert len(lines) <= MAX_DICT_ANY, f"{len(lines)} lines name dict[str, Any]"


def test_no_module_is_longer_than_600_lines() -> None:
    assert long_modules(path for _, path in modules()) == {}


def test_plan_pts_is_imported_by_the_pts_suite_and_the_registry_only(
        sources: dict[str, ast.Module]) -> None:
    assert importers_of(PTS_MODULE, sources) - pts_suite_modules() == set()


def test_the_dead_code_is_gone(sources: dict[str, ast.Module]) -> None:
    there = {f"{module}.{name}" for module, names in DEAD.items() if module in sources
             for name in names if name in defined(sources[module])}
    assert there == set()


# -- the checkers find what they must -------------------------------------------------------


def _parsed(sources: dict[str, str]) -> dict[str, ast.Module]:
    return {name: ast.parse(text) for name, text in sources.items()}


def test_the_line_checkers_count_as_grep_and_wc_do(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("x: dict[str, Any] = {}\ny: dict[str, object] = {}\n"
                      + "z = 2\n" * 599 + "last = 1", encoding="utf-8")  # no newline at the end
    assert dict_any_lines([module]) == [f"{module}:1"]
    assert long_modules([module]) == {str(module): 601}
    assert long_modules([module], limit=601) == {}


def test_the_import_checker_sees_every_kind_of_import() -> None:
    sources = _parsed({
        "a": "from ssdlab.plan.pts import ActiveRange\n",
        "b": "def f():\n    from ssdlab.plan import pts\n",
        "c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ssdlab.plan.pts\n",
        "d": "import importlib\nimportlib.import_module('ssdlab.plan.pts')\n",
        "e": "from ssdlab.plan.ptsx import y\nfrom ssdlab.plan import options\n",
    })
    assert importers_of(PTS_MODULE, sources) == {"a", "b", "c", "d"}


def test_the_dead_code_checker_sees_functions_classes_methods_and_names() -> None:
    tree = ast.parse("from x import IOENGINES\nPURGE = 1\nclass C:\n    def g(self): ...\n"
                     "def f(): ...\n")
    assert defined(tree) >= {"IOENGINES", "PURGE", "C", "C.g", "f"}


def test_the_pts_suites_own_modules_are_found() -> None:
    mods = pts_suite_modules()
    assert {"ssdlab.run.pts_run", "ssdlab.report.pts_pages", "ssdlab.suites"} <= mods
    # the module that defines the spec (plan/options.py on 84b2068; plan/pts.py after)
    assert mods & {"ssdlab.plan.options", "ssdlab.plan.pts"}
    assert all(own for own in own_modules().values())
