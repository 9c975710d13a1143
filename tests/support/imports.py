"""Every import of the package's modules, as the AST says it: module level, inside
functions, under ``if TYPE_CHECKING:``, ``importlib.import_module("literal")``, and the
modules the registry (``ssdlab/suites.py``) loads by name. Read by the layer test
(tests/unit/test_architecture.py) and the import-loop test (test_import_cycles.py).
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "ssdlab"
REGISTRY = "ssdlab.suites"
#: calls that import the module their first argument names
DYNAMIC_CALLS = ("importlib.import_module", "import_module", "__import__")


class Kind(enum.Enum):
    TOP = "module level"
    FUNCTION = "in a function"
    TYPE_CHECKING = "under TYPE_CHECKING"
    DYNAMIC = "import_module"
    REGISTRY = "the registry's module name"


@dataclass(frozen=True)
class Import:
    """One import: where, what it names (``from ssdlab.plan import pts``: ``ssdlab.plan``;
    ``from ssdlab import x``: ``ssdlab.x``), the module it loads (``ssdlab.plan.pts``), how."""

    line: int
    name: str
    module: str
    kind: Kind

    def __str__(self) -> str:
        return f"line {self.line}: {self.name} ({self.kind.value})"


def module_name(path: Path) -> str:
    """``ssdlab.plan.pts`` of src/ssdlab/plan/pts.py, ``ssdlab.store`` of its __init__.py."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, known: Iterable[str]) -> str:
    """The module ``name`` loads: itself, or its longest prefix that is a module."""
    have = set(known)
    while name not in have and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _kinds(tree: ast.Module) -> Iterator[tuple[ast.AST, Kind]]:
    """Every node with the kind an import there would be."""
    def walk(node: ast.AST, kind: Kind) -> Iterator[tuple[ast.AST, Kind]]:
        for child in ast.iter_child_nodes(node):
            inner = kind
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) \
                    and kind is Kind.TOP:
                inner = Kind.FUNCTION
            yield child, kind
            if isinstance(child, ast.If) and _is_type_checking(child):
                for stmt in child.body:
                    yield stmt, Kind.TYPE_CHECKING
                    yield from walk(stmt, Kind.TYPE_CHECKING)
                for stmt in child.orelse:
                    yield stmt, kind
                    yield from walk(stmt, kind)
                continue
            yield from walk(child, inner)
    return walk(tree, Kind.TOP)


def dynamic_name(node: ast.AST) -> str | None:
    """The module an ``import_module(...)`` call names: the literal, "" when it is not
    one; None when ``node`` is no such call."""
    if not (isinstance(node, ast.Call) and ast.unparse(node.func) in DYNAMIC_CALLS):
        return None
    first = node.args[0] if node.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) \
        else ""


def imports_in(tree: ast.Module, package: str, known: Iterable[str] = ()) -> Iterator[Import]:
    """The ssdlab imports of a module's AST (``package``: the package its relative imports
    start from; ``known``: the modules that exist, to say which one an import loads)."""
    have = set(known)
    for node, kind in _kinds(tree):
        for name, module, how in _named(node, kind, package, have):
            if name == "ssdlab" or name.startswith("ssdlab."):
                yield Import(getattr(node, "lineno", 0), name,
                             _resolve(module, have) if have else module, how)


def _named(node: ast.AST, kind: Kind, package: str, have: set[str]
           ) -> list[tuple[str, str, Kind]]:
    """(name, module, kind) of what ``node`` imports, if it is an import."""
    if isinstance(node, ast.Import):
        return [(a.name, a.name, kind) for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            base = ".".join([*parts[:len(parts) - node.level + 1], *filter(None, [base])])
        return [(f"{base}.{a.name}" if base == "ssdlab" else base,
                 f"{base}.{a.name}" if f"{base}.{a.name}" in have else base, kind)
                for a in node.names]
    named = dynamic_name(node)
    return [(named, named, Kind.DYNAMIC)] if named else []


def registry_imports(tree: ast.Module, suites: Iterable[tuple[str | None, str]]
                     ) -> Iterator[Import]:
    """The modules the registry loads by name: each suite's run module (in ``ssdlab.run``)
    and pages module (in ``ssdlab.report``), or a dotted path. ``suites``: (run module,
    pages module) of each registered suite; the line is where the registry names it."""
    lines: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            lines.setdefault(node.value, node.lineno)
    for run, pages in suites:
        for package, name in (("ssdlab.run", run), ("ssdlab.report", pages)):
            if name is not None:
                module = name if "." in name else f"{package}.{name}"
                yield Import(lines.get(name, 0), module, module, Kind.REGISTRY)


def registered() -> list[tuple[str | None, str]]:
    """(run module, pages module) of every registered suite."""
    from ssdlab.suites import SUITES
    return [(s.run_module, s.pages_module) for s in SUITES]


def imports_of(path: Path, known: Iterable[str] = ()) -> list[Import]:
    """Every ssdlab import of the module at ``path``; the registry's too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = list(imports_in(tree, package, known))
    if name == REGISTRY:
        found += registry_imports(tree, registered())
    return found


def non_literal_imports(path: Path) -> list[int]:
    """Lines of ``import_module(...)`` calls whose module is not a literal."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [getattr(node, "lineno", 0) for node in ast.walk(tree) if dynamic_name(node) == ""]


def graph(kinds: Iterable[Kind] = tuple(Kind)) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (by the ``kinds`` of imports given)."""
    mods = modules()
    wanted = set(kinds)
    return {name: {i.module for i in imports_of(path, mods)
                   if i.kind in wanted and i.module in mods and i.module != name}
            for name, path in mods.items()}


def reachable(start: str, edges: Mapping[str, Iterable[str]]) -> set[str]:
    """The modules ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(edges.get(start, ()))
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += edges.get(module, ())
    return seen


def loops(edges: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """Import loops: the strongly connected components of more than one module (modules
    each of which reaches every other), in order."""
    reach = {module: reachable(module, edges) for module in edges}
    components = {frozenset({m} | {o for o in reach[m] if m in reach.get(o, ())})
                  for m in edges}
    return sorted((c for c in components if len(c) > 1), key=sorted)
