"""Issue 31's goals for the shape of the code (docs: /work/notes/issue31-plan.md §1):
each is a test, marked as an expected failure (strict) until the work package that
reaches it removes its mark. Strict: a goal reached with its mark still on fails, so
the mark comes off in the same change. Each mark expects an AssertionError only: a
checker that breaks fails at once instead of passing for an expected failure.

* at most 60 lines in src/ name ``dict[str, Any]`` (228 on 84b2068);
* no module in src/ is longer than 600 lines (9 were);
* plan/pts.py is imported only by the PTS suite's own modules and the registry;
* no suite is named in shared code: a suite's name compared with, looked up in the
  registry, or held in a constant that is compared, outside that suite's own modules
  (:func:`suite_names`; one listed exception);
* none of the dead code the issue names is there.

The checkers themselves are tested here too (without a mark): each finds what it must.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "ssdlab"
MAX_DICT_ANY = 60
MAX_LINES = 600
PTS_MODULE = "ssdlab.plan.pts"
#: a suite named outside its own modules on purpose: the matrix's default child suite
#: (changing it changes `ssdlab run matrix --help`)
EXCEPTIONS = {("ssdlab.plan.matrix", "DEFAULT_CHILD")}
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


@dataclass(frozen=True)
class Named:
    """A suite's name in shared code: where, the name, and how it is used."""

    module: str
    line: int
    suite: str
    how: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} {self.suite!r} ({self.how})"


def _names_in(node: ast.AST, suites: set[str]) -> list[str]:
    """Suite names a constant, or a tuple/list/set literal of constants, holds."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in suites else []
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [n for element in node.elts for n in _names_in(element, suites)]
    if (isinstance(node, ast.Call) and ast.unparse(node.func) in ("frozenset", "set", "tuple")
            and node.args):
        return _names_in(node.args[0], suites)
    return []


def _module_constants(tree: ast.Module) -> Iterator[tuple[str, ast.AST, int]]:
    for stmt in tree.body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        for target in targets:
            if isinstance(target, ast.Name):
                yield target.id, value, stmt.lineno


def _compared(sources: Iterable[ast.Module]) -> set[str]:
    """The names (variables, attributes) that some comparison uses."""
    out: set[str] = set()
    for tree in sources:
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for operand in (node.left, *node.comparators):
                    out.update(sub.id for sub in ast.walk(operand) if isinstance(sub, ast.Name))
                    out.update(sub.attr for sub in ast.walk(operand)
                               if isinstance(sub, ast.Attribute))
    return out


def _uses(tree: ast.Module, suites: set[str]) -> Iterator[tuple[str, int, str]]:
    """(suite, line, how) of names compared or looked up in the registry."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                yield from ((suite, node.lineno, "compared")
                            for suite in _names_in(operand, suites))
        elif (isinstance(node, ast.Call) and node.args
              and ast.unparse(node.func) in ("find", "suites.find", "registry.find")):
            yield from ((suite, node.lineno, "looked up")
                        for suite in _names_in(node.args[0], suites))


def _held(module: str, tree: ast.Module, suites: set[str], compared: set[str]
          ) -> Iterator[tuple[str, int, str]]:
    """(suite, line, how) of names held in module constants that are compared, or that
    are a default suite (``DEFAULT_*``, ``*_SUITE*``)."""
    for name, value, line in _module_constants(tree):
        held = _names_in(value, suites)
        if (module, name) in EXCEPTIONS or not held:
            continue
        if name in compared:
            yield from ((suite, line, f"{name}, compared") for suite in held)
        elif name.startswith("DEFAULT_") or "_SUITE" in name:
            yield from ((suite, line, name) for suite in held)


def suite_names(sources: dict[str, ast.Module], suites: set[str],
                own: dict[str, set[str]]) -> list[Named]:
    """A suite named outside its own modules (``own``: suite -> its modules):

    (a) a name compared (``==``, ``!=``, ``in``, ``not in``), directly or in a tuple,
        list or set literal operand;
    (b) a module-level constant holding a name that some comparison in the package uses
        (``suite in REMOTE_SUITES``);
    (c) a registry lookup of a name (``find("pts")``, ``suites.find("pts")``);
    (d) a module constant ``DEFAULT_*`` or ``*_SUITE*`` whose value is a name.

    Data keys, messages, paths and command names are not flagged: they are not compared.
    """
    compared = _compared(sources.values())
    return [Named(module, line, suite, how) for module, tree in sources.items()
            for suite, line, how in (*_uses(tree, suites),
                                     *_held(module, tree, suites, compared))
            if module not in own.get(suite, set())]


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
            out.update(name for name, _, _ in _module_constants(ast.Module([stmt], [])))
    return out


# -- what the package is now ------------------------------------------------------------------


@pytest.fixture(scope="module")
def sources() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in modules()}


def _dotted(package: str, name: str) -> str:
    return name if "." in name else f"{package}.{name}"


@functools.cache
def own_modules() -> dict[str, set[str]]:
    """Each registered suite's own modules: the one that makes its spec (assigns it to a
    module-level name), its run module and its pages module (the registry's line)."""
    from ssdlab import suites as registry
    out: dict[str, set[str]] = {}
    for suite in registry.SUITES:
        mods = {_dotted("ssdlab.report", suite.pages_module)}
        if suite.run_module is not None:
            mods.add(_dotted("ssdlab.run", suite.run_module))
        for module in list(sys.modules.values()):
            name = getattr(module, "__name__", "")
            source = getattr(module, "__file__", None)
            holds = {k for k, v in vars(module).items() if v is suite.spec}
            if name.startswith("ssdlab.") and name != "ssdlab.suites" and holds and source:
                tree = ast.parse(Path(source).read_text(encoding="utf-8"))
                if holds & {k for k, _, _ in _module_constants(tree)}:
                    mods.add(name)
        out[suite.name] = mods
    return out


def pts_suite_modules() -> set[str]:
    return own_modules()["pts"] | {"ssdlab.suites"}


# -- the goals ---------------------------------------------------------------------------------


@GOAL
def test_dict_str_any_is_named_on_at_most_60_lines() -> None:
    lines = dict_any_lines(path for _, path in modules())
    assert len(lines) <= MAX_DICT_ANY, f"{len(lines)} lines name dict[str, Any]"


def test_no_module_is_longer_than_600_lines() -> None:
    assert long_modules(path for _, path in modules()) == {}


@GOAL
def test_plan_pts_is_imported_by_the_pts_suite_and_the_registry_only(
        sources: dict[str, ast.Module]) -> None:
    assert importers_of(PTS_MODULE, sources) - pts_suite_modules() == set()


@GOAL
def test_no_suite_is_named_in_shared_code(sources: dict[str, ast.Module]) -> None:
    from ssdlab.suites import SUITES
    shared = {name: tree for name, tree in sources.items() if name != "ssdlab.suites"}
    found = suite_names(shared, {s.name for s in SUITES}, own_modules())
    assert found == [], "\n".join(map(str, found))


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


def test_the_names_checker_finds_the_five_patterns_of_84b2068() -> None:
    suites = {"pts", "db", "published", "replay", "matrix"}
    own = {"pts": {"ssdlab.plan.pts"}, "matrix": {"ssdlab.plan.matrix"}}
    found = suite_names(_parsed({
        # report/build.py: the title by the suite's name
        "ssdlab.report.build": 'kind = "x" if all(r.suite == "db" for r in runs) else "y"\n',
        # run/remote.py: the suites that run on other hosts
        "ssdlab.run.remote": 'REMOTE_SUITES = ("pts",)\n'
                             'def check(suite):\n    return suite in REMOTE_SUITES\n',
        # report/run_pages.py: the title page's table by a suite's word
        "ssdlab.report.run_pages": 'def t(kind):\n    if kind == "pts":\n        return 1\n',
        # cli/demo_cmd.py: the demo's suite looked up by name
        "ssdlab.cli.demo_cmd": 'from ssdlab.suites import find\nSUITE = find("pts")\n',
        # plan/matrix.py: the default child (the listed exception) and another default
        "ssdlab.plan.matrix": 'DEFAULT_CHILD = "pts"\nDEFAULT_OTHER = "db"\n',
        # the suite's own module may name itself; data keys and messages are not names
        "ssdlab.plan.pts": 'def f(s):\n    return s == "pts"\n',
        "ssdlab.report.figures": 'STATE = {"published": 1}\nprint("db")\n',
    }), suites, own)
    assert sorted((n.module, n.suite, n.how) for n in found) == sorted([
        ("ssdlab.report.build", "db", "compared"),
        ("ssdlab.run.remote", "pts", "REMOTE_SUITES, compared"),
        ("ssdlab.report.run_pages", "pts", "compared"),
        ("ssdlab.cli.demo_cmd", "pts", "looked up"),
        ("ssdlab.plan.matrix", "db", "DEFAULT_OTHER"),
    ])


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
