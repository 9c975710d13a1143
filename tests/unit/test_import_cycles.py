"""No import loops among the package's modules: no module imports itself back through
others, whatever the kind of import (tests/support/imports.py: at module level, in a
function, under ``TYPE_CHECKING``, by ``import_module``, the registry's modules by name).

A loop listed in :data:`KNOWN` is one a work package of issue 31 breaks; the test fails
on any other loop, and on a listed one that is gone (take it out of the list).
"""

from __future__ import annotations

from tests.support.imports import Kind, graph, loops

#: loops not broken yet -> who breaks them
KNOWN: dict[frozenset[str], str] = {}  # none left (WP5 broke suites <-> matrix)


def _shown(found: list[frozenset[str]]) -> str:
    return "; ".join(" <-> ".join(sorted(loop)) for loop in found)


def test_no_module_imports_itself_back() -> None:
    found = loops(graph())
    new = [loop for loop in found if loop not in KNOWN]
    assert not new, f"import loops: {_shown(new)}"
    gone = [loop for loop in KNOWN if loop not in found]
    assert not gone, f"broken now, out of KNOWN: {_shown(gone)}"


def test_there_is_no_loop_at_module_level_or_for_the_type_checker() -> None:
    assert loops(graph([Kind.TOP, Kind.TYPE_CHECKING])) == []


def test_the_loop_finder_finds_loops_of_every_length() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"},
             "g": {"g"}}
    assert loops(edges) == [frozenset({"a", "b", "c"}), frozenset({"e", "f"})]
    assert loops({"a": {"b"}, "b": set()}) == []


def test_every_kind_of_import_makes_an_edge() -> None:
    """The registry's modules, function-level and TYPE_CHECKING imports are edges: the
    registry loads the pts suite's pages, which find suites through the report."""
    every = graph()
    assert "ssdlab.report.pts_pages" in every["ssdlab.suites"]  # the registry's line
    assert every["ssdlab.cli.run_cmd"] >= {"ssdlab.suites"}  # inside a function
    assert "ssdlab.store.records" in every["ssdlab.suites"]  # under TYPE_CHECKING
    assert "ssdlab.store.records" not in graph([Kind.TOP])["ssdlab.suites"]
