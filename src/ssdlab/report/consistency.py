"""The self-consistency checks as every view shows them (docs/consistency.md): the
run-level "measured memory, not the drive" lines, each test's check line and the footnotes
of its marked cells, and the mark a table puts on such a cell. Read from the stored
``consistency`` events (plan/consistency.py) and the cells' own ``littles_law`` key."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ssdlab.analysis.consistency import MARKED
from ssdlab.plan.consistency import MARK, ConsistencyChecks, checks_of, footnotes, memory_lines
from ssdlab.plan.specs import Mix, block_label
from ssdlab.report.html import Page, banner, esc, table
from ssdlab.store.records import RunData, TestData

__all__ = ["MARK", "cell_mark", "check_lines", "header_lines", "html_note", "marked_labels",
           "run_checks", "title_banners", "title_section", "with_checks"]


def run_checks(run: RunData) -> dict[str, ConsistencyChecks]:
    return checks_of(run.events)


def cell_mark(cell: Mapping[str, Any] | None) -> str:
    """:data:`MARK` for a cell whose Little's law verdict is marked (its latency is the
    total one, or its figures contradict each other), else ""."""
    return MARK if cell is not None and cell.get("littles_law") in MARKED else ""


def header_lines(run: RunData) -> list[str]:
    """``ssdlab show``'s run-level warnings."""
    return [f"WARNING: {line}" for line in memory_lines(run_checks(run))]


def _label(cell: Mapping[str, Any]) -> str | None:
    """A cell's name as its suite's tables show it: its own label, a preset's group and
    mode ("SEQ1M Q1T1 read"), else its block size and mix ("4 KiB 0/100")."""
    if isinstance(cell.get("label"), str):
        return str(cell["label"])
    group, mode = cell.get("group"), cell.get("mode")
    if isinstance(group, str) and isinstance(mode, str):
        return f"{group} {mode}"
    block, read = cell.get("block_bytes"), cell.get("read_pct")
    if isinstance(block, int) and isinstance(read, int):
        return f"{block_label(block)} {Mix(read).label}"
    return None


def cell_labels(test: TestData) -> dict[str, str]:
    """Each measured cell's name as the tables show it, by cell id (a name two cells
    share is left out: the footnote then gives the id)."""
    labels: dict[str, str] = {}
    for cell in (c for r in test.rounds for c in r.cells):
        name, label = cell.get("cell"), _label(cell)
        if isinstance(name, str) and label is not None:
            labels[name] = label
    shared = {v for v in labels.values() if list(labels.values()).count(v) > 1}
    return {k: v for k, v in labels.items() if v not in shared}


def marked_labels(run: RunData, test: TestData) -> set[str]:
    """The names (as tables show them) of the test's marked cells."""
    checks = run_checks(run).get(test.name)
    labels = cell_labels(test)
    return {labels.get(c.cell, c.cell) for c in checks.marked} if checks is not None else set()


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
    rows = [[esc(t.params.get("title", t.name)), esc(c.message)]
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
