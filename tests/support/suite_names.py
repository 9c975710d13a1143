"""The suites' names in shared code (issue 31: "no suite named in shared code"): where
a registered suite's name is compared, looked up in the registry, or held in a constant
that is compared, outside that suite's own modules. Read by tests/unit/test_suite_names.py
(the goal and the checker's own test) and test_shape.py (a suite's own modules).
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: a suite named outside its own modules on purpose: the matrix's default child suite
#: (changing it changes `ssdlab run matrix --help`); the peak suite's name where
#: `--threads auto --qd auto` of other suites reads the target's newest peak run
#: (docs/peak.md): a use of that suite's stored results (its PeakResult, its workloads),
#: which no other suite's runs can stand in for, so no capability of a spec says it
EXCEPTIONS = {("ssdlab.plan.matrix", "DEFAULT_CHILD"), ("ssdlab.run.peak_load", "SUITE")}


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


def module_constants(tree: ast.Module) -> Iterator[tuple[str, ast.AST, int]]:
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
    for name, value, line in module_constants(tree):
        held = _names_in(value, suites)
        if (module, name) in EXCEPTIONS or not held:
            continue
        if name in compared:
            yield from ((suite, line, f"{name}, compared") for suite in held)
        elif name.startswith("DEFAULT_") or "_SUITE" in name:
            yield from ((suite, line, name) for suite in held)


def _imported(module: str, tree: ast.Module, holders: dict[str, dict[str, list[str]]]
              ) -> Iterator[tuple[str, int, str]]:
    """(suite, line, how) of another module's ``*SUITE*`` constants holding a name,
    imported here and compared here (``from ssdlab.plan.peak import SUITE`` ...
    ``r.suite == SUITE``). Only ``*SUITE*``: other constants may hold a word that is also
    a suite's name (reference/published.py's ``TEST_STATUS = "published"``, a status)."""
    compared = _compared([tree])
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.module not in holders:
            continue
        for alias in node.names:
            local = alias.asname or alias.name
            held = holders[node.module].get(alias.name, [])
            if (held and "SUITE" in alias.name and local in compared
                    and (module, local) not in EXCEPTIONS):
                yield from ((suite, node.lineno, f"{local} from {node.module}, compared")
                            for suite in held)


def suite_names(sources: dict[str, ast.Module], suites: set[str],
                own: dict[str, set[str]]) -> list[Named]:
    """A suite named outside its own modules (``own``: suite -> its modules):

    (a) a name compared (``==``, ``!=``, ``in``, ``not in``), directly or in a tuple,
        list or set literal operand;
    (b) a module-level constant holding a name that some comparison in the package uses
        (``suite in REMOTE_SUITES``);
    (c) a registry lookup of a name (``find("pts")``, ``suites.find("pts")``);
    (d) a module constant ``DEFAULT_*`` or ``*_SUITE*`` whose value is a name;
    (e) a constant ``*SUITE*`` holding a name, imported from another module and compared
        where it is imported (``from ssdlab.plan.peak import SUITE``, ``r.suite == SUITE``).

    Data keys, messages, paths and command names are not flagged: they are not compared.
    """
    compared = _compared(sources.values())
    holders = {module: {name: held for name, value, _ in module_constants(tree)
                        if (held := _names_in(value, suites))}
               for module, tree in sources.items()}
    return [Named(module, line, suite, how) for module, tree in sources.items()
            for suite, line, how in (*_uses(tree, suites),
                                     *_held(module, tree, suites, compared),
                                     *_imported(module, tree, holders))
            if module not in own.get(suite, set())]


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
                if holds & {k for k, _, _ in module_constants(tree)}:
                    mods.add(name)
        out[suite.name] = mods
    return out
