"""The self-consistency checks as every view shows them (docs/consistency.md): the
run-level "measured memory, not the drive" lines, each test's check line and the footnotes
of its marked cells (named as the tables name them), and the mark a table puts on such a
cell. Read from the stored ``consistency`` events (plan/consistency.py: the cells that
measured memory) and the cells' own ``littles_law`` key."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

from ssdlab.analysis.consistency import MARKED
from ssdlab.plan.consistency import (
    MARK,
    ConsistencyChecks,
    checks_of,
    footnotes,
    memory_lines,
)
from ssdlab.plan.consistency import cell_labels as plan_cell_labels
from ssdlab.report.figures import test_title
from ssdlab.report.html import Page, banner, esc, table
from ssdlab.store.records import RunData, TestData

__all__ = ["MARK", "cell_labels", "cell_mark", "check_lines", "header_lines", "html_note",
           "marked_json", "marked_labels", "memory_cells", "run_checks", "title_banners",
           "title_section", "with_checks"]


def run_checks(run: RunData) -> dict[str, ConsistencyChecks]:
    return checks_of(run.events)


def cell_mark(cell: Mapping[str, Any] | None, memory: Collection[str] = ()) -> str:
    """:data:`MARK` for a cell whose Little's law verdict is marked (its latency is the
    total one, or its figures contradict each other), or that measured memory, not the
    drive (its id in ``memory``: :func:`memory_cells`), else ""."""
    if cell is None:
        return ""
    return MARK if cell.get("littles_law") in MARKED or cell.get("cell") in memory else ""


def memory_cells(run: RunData, test: TestData) -> frozenset[str]:
    """The ids of the test's cells that measured memory, not the drive."""
    checks = run_checks(run).get(test.name)
    return checks.memory_cells if checks is not None else frozenset()


def marked_json(detail: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A stored checks record's marked cells for the dashboard: each one's name as tables
    show it, its Little's law status, whether it measured memory and why it is marked."""
    checks = ConsistencyChecks.from_json(dict(detail), "consistency event")
    return [{"cell": c.name, "status": c.status, "memory": c.memory is not None,
             "message": c.reason} for c in checks.marked]


def header_lines(run: RunData) -> list[str]:
    """``ssdlab show``'s run-level warnings."""
    return [f"WARNING: {line}" for line in memory_lines(run_checks(run))]


def cell_labels(test: TestData) -> dict[str, str]:
    """Each measured cell's name as the tables show it, by cell id (a name two cells
    share is left out: the footnote then gives the id)."""
    return plan_cell_labels(c for r in test.rounds for c in r.cells)


def marked_labels(run: RunData, test: TestData) -> set[str]:
    """The names (as tables show them) of the test's marked cells."""
    checks = run_checks(run).get(test.name)
    labels = cell_labels(test)
    return {c.label or labels.get(c.cell, c.cell) for c in checks.marked} \
        if checks is not None else set()


def check_lines(checks: ConsistencyChecks | None, test: TestData | None = None) -> list[str]:
    """A test's lines in ``ssdlab show``: its checks, then one footnote per marked cell."""
    if checks is None:
        return []
    labels = cell_labels(test) if test is not None else {}
    return [f"  checks: {checks.message}",
            *(f"  {line}" for line in footnotes(checks, labels))]


def html_note(checks: ConsistencyChecks | None, test: TestData | None = None) -> str:
    """The checks at the foot of a test's page (nothing when every cell agrees and the
    stack is direct: the title page says so)."""
    if checks is None or not (checks.marked or checks.cache.memory or checks.cache.by_design):
        return ""
    head = (banner("failed", checks.cache.message) if checks.cache.memory else
            f'<p class="note">{esc(checks.cache.message)}</p>')
    labels = cell_labels(test) if test is not None else {}
    notes = "".join(f"<li>{esc(line)}</li>" for line in footnotes(checks, labels))
    return (f'<div class="consistency"><h3>Consistency checks</h3>{head}'
            + (f'<ul class="small">{notes}</ul>' if notes else "") + "</div>")


def title_banners(run: RunData) -> str:
    """The title page's first lines: each "measured memory, not the drive" verdict."""
    return "".join(banner("failed", line) for line in memory_lines(run_checks(run)))


def title_section(run: RunData) -> str:
    """The title page's section: every test's checks in one table."""
    checks = run_checks(run)
    if not checks:
        return ""
    rows = [[esc(test_title(t)), esc(c.message)]
            for t in run.tests if (c := checks.get(t.name)) is not None]
    return ("<h3>Consistency checks</h3>"
            + table(("test", "Little's law and cache-bound checks"), rows))


def with_checks(pages: list[Page], run: RunData, test: TestData) -> list[Page]:
    """A test's pages with its checks at the foot of each page whose tables mark a cell,
    else of the first one."""
    note = html_note(run_checks(run).get(test.name), test)
    if not pages or not note:
        return pages
    marking = [n for n, page in enumerate(pages) if f"{MARK}</td>" in page.body] or [0]
    return [dataclasses.replace(page, body=page.body + note) if n in marking else page
            for n, page in enumerate(pages)]
