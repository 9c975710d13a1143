"""The stored record of a test's self-consistency checks (docs/consistency.md): Little's
law on every fio job of its measured rounds, and whether it measured memory rather than
the drive.

When a run ends, the run stores one event of kind :data:`EVENT_KIND` per test, its detail
a :class:`ConsistencyChecks` (run/consistency.py); ``ssdlab show``, the report, the export and
the dashboard read them back with :func:`checks_of`. Runs stored before the checks have no
such events and show nothing of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ssdlab.analysis.consistency import MARKED, MEMORY
from ssdlab.jsonrecord import Record
from ssdlab.plan.specs import cell_label as spec_cell_label

#: the kind of the events that hold a test's checks
EVENT_KIND = "consistency"
#: the mark of a cell whose Little's law verdict is worth a footnote (tables, charts)
MARK = "*"


@dataclass(frozen=True)
class CellCheck(Record):
    """Little's law on one cell (by name) over the rounds it was measured in: its most
    telling verdict (a contradiction before a total latency, before an agreement); and,
    where the cell measured memory rather than the drive, why (``memory``)."""

    OMIT_NONE = frozenset({"label", "memory"})

    cell: str = ""  # the cell's id (its fio job's name)
    status: str = ""  # analysis.consistency: agrees, total, exceeds, open
    rounds: int = 0  # rounds with this status
    message: str = ""  # the first such round's verdict in words ("round 1: ...")
    label: str | None = None  # the cell's name as tables show it ("4 KiB 0/100")
    memory: str | None = None  # why it measured memory, not the drive (None: it did not)

    @property
    def marked(self) -> bool:
        return self.status in MARKED or self.memory is not None

    @property
    def name(self) -> str:
        """The cell as tables name it (its label), else its id."""
        return self.label or self.cell

    @property
    def reason(self) -> str:
        """Why the cell is marked: the memory verdict first, then Little's law's."""
        parts = [f"{MEMORY}: {self.memory}"] if self.memory is not None else []
        if self.status in MARKED or not parts:
            parts.append(self.message + (f" (and so in {self.rounds - 1} more)"
                                         if self.rounds > 1 else ""))
        return "; ".join(parts)


@dataclass(frozen=True)
class CacheCheck(Record):
    """Whether the test measured memory rather than the drive, and why."""

    memory: bool = False
    by_design: bool = False
    message: str = ""
    layers: list[str] = field(default_factory=list)  # each not-direct layer, in words


@dataclass(frozen=True)
class ConsistencyChecks(Record):
    """A test's checks: how many fio jobs were judged, each cell's Little's law verdict,
    the cache-bound verdict; ``message`` is one line for all of it."""

    OMIT_NONE = frozenset({"not_applicable"})

    test: str = ""
    jobs_checked: int = 0
    statuses: dict[str, int] = field(default_factory=dict)  # status -> fio jobs
    cells: list[CellCheck] = field(default_factory=list)  # one per cell name
    cache: CacheCheck = field(default_factory=CacheCheck)
    message: str = ""
    not_applicable: str | None = None  # why nothing could be judged (no fio job)

    @property
    def marked(self) -> list[CellCheck]:
        return [c for c in self.cells if c.marked]

    def mark(self, cell: str) -> str:
        """:data:`MARK` for a marked cell, else ""."""
        return MARK if any(c.cell == cell for c in self.marked) else ""

    @property
    def memory_cells(self) -> frozenset[str]:
        """The ids of the cells that measured memory, not the drive."""
        return frozenset(c.cell for c in self.cells if c.memory is not None)

    @property
    def flagged(self) -> bool:
        """A contradiction or memory measured: the test's figures are not the drive's."""
        return self.cache.memory or any(c.status == "exceeds" for c in self.cells)


#: each Little's law status in a test's line (analysis/consistency.py)
STATUS_WORDS = {"agrees": "agree", "total": "submission-bound (total latency shown)",
                "exceeds": "contradict themselves", "open": "rate-limited"}


def summary(test: str, jobs: int, statuses: Mapping[str, int], cells: list[CellCheck],
            cache: CacheCheck, not_applicable: str | None = None) -> ConsistencyChecks:
    """The record, with its one-line message."""
    if not_applicable is not None:
        message = f"not checked: {not_applicable}"
    else:
        parts = [f"Little's law on {jobs:,} fio job(s): " + ", ".join(
            f"{n:,} {STATUS_WORDS.get(status, status)}" for status, n in sorted(
                statuses.items(), key=lambda item: list(STATUS_WORDS).index(item[0])
                if item[0] in STATUS_WORDS else len(STATUS_WORDS)))]
        marked = [c for c in cells if c.marked]
        if marked:
            parts.append(f"{len(marked)} cell(s) marked {MARK}")
        parts.append(cache.message)
        message = "; ".join(parts)
    return ConsistencyChecks(test, jobs, dict(statuses), cells, cache, message, not_applicable)


def checks_of(events: Iterable[Any]) -> dict[str, ConsistencyChecks]:
    """Each test's stored checks, by test name (a run stored before them: none)."""
    out: dict[str, ConsistencyChecks] = {}
    for event in events:
        if event.kind == EVENT_KIND and event.test is not None and isinstance(
                event.detail, dict):
            out[event.test] = ConsistencyChecks.from_json(event.detail, f"{EVENT_KIND} event")
    return out


def memory_lines(checks: Mapping[str, ConsistencyChecks]) -> list[str]:
    """The run-level verdicts: each different "measured memory" line once."""
    lines: list[str] = []
    for c in checks.values():
        if c.cache.memory and c.cache.message not in lines:
            lines.append(c.cache.message)
    return lines


def footnotes(checks: ConsistencyChecks | None, labels: Mapping[str, str] | None = None
              ) -> list[str]:
    """The footnote lines of a test's marked cells (``* cell: reason``), each cell named by
    its label (``labels``: the cells' names as tables show them, by cell id, for checks
    stored before they kept their labels)."""
    if checks is None:
        return []
    names = labels or {}
    return [f"{MARK} {c.label or names.get(c.cell, c.cell)}: {c.reason}" for c in checks.marked]


def cell_label(cell: Mapping[str, Any]) -> str | None:
    """A stored cell's name as its suite's tables show it: its own label, a preset's group
    and mode ("SEQ1M Q1T1 read"), else its block size and mix ("4 KiB 0/100", as
    :func:`ssdlab.plan.specs.cell_label` names a PTS cell); None: it has none of these."""
    if isinstance(cell.get("label"), str):
        return str(cell["label"])
    group, mode = cell.get("group"), cell.get("mode")
    if isinstance(group, str) and isinstance(mode, str):
        return f"{group} {mode}"
    block, read = cell.get("block_bytes"), cell.get("read_pct")
    if isinstance(block, int) and isinstance(read, int):
        return spec_cell_label(block, read)
    return None


def cell_labels(cells: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Each stored cell's label (:func:`cell_label`) by its id (``cell``); a label two
    cells share is left out (those cells are then named by their ids)."""
    labels: dict[str, str] = {}
    for cell in cells:
        name, label = cell.get("cell"), cell_label(cell)
        if isinstance(name, str) and label is not None:
            labels[name] = label
    shared = {v for v in labels.values() if list(labels.values()).count(v) > 1}
    return {k: v for k, v in labels.items() if v not in shared}


__all__ = ["EVENT_KIND", "MARK", "MEMORY", "CacheCheck", "CellCheck", "ConsistencyChecks",
           "cell_label", "cell_labels", "checks_of", "footnotes", "memory_lines", "summary"]
