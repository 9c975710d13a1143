"""The report's part of the suite contract: a suite's report pages, its ``ssdlab show``
lines, its overlay in a comparison, and what ``ssdlab run`` prints when a run ends.

Each suite's pages module defines one :class:`SuitePages` named ``PAGES``; the registry
(:mod:`ssdlab.suites`) finds it, and the report reaches it through ``registry.py`` only.
Everything here reads stored runs only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ssdlab.jsonrecord import Record
from ssdlab.report.figures import test_kind
from ssdlab.report.html import Page
from ssdlab.report.parts import tests_table
from ssdlab.store.records import RunData, TestData

R = TypeVar("R", bound=Record)

#: the report pages of one test: (run, test, anchor) -> pages
PageMaker = Callable[[RunData, TestData, str], list[Page]]
#: the lines ``ssdlab show`` prints under a test's heading: (run, test) -> lines
ShowLines = Callable[[RunData, TestData], list[str]]
#: a comparison's overlay of the runs it can compare: (runs, their labels) -> HTML
Overlay = Callable[[Sequence[RunData], Sequence[str]], str]
#: the title page's table of a run's tests: (run, the tests its suite has pages for) -> HTML
TitleTable = Callable[[RunData, Sequence[TestData]], str]


@dataclass(frozen=True)
class Outcome:
    """What ``ssdlab run`` prints when a run has ended, and whether it failed (the
    one-line error, exit status 1)."""

    lines: tuple[str, ...]
    failure: str | None = None


@dataclass(frozen=True)
class SuitePages:
    """The report's part of a suite's contract (see the module's documentation)."""

    #: test name -> its pages ("throughput" stands for every "throughput-*" test)
    pages: Mapping[str, PageMaker]
    show: Mapping[str, ShowLines]  # test name -> its ``ssdlab show`` lines
    outcome: Callable[[RunData, object], Outcome]  # (run, store path) -> what run prints
    overlay: Overlay | None = None
    #: pages of a test the suite does not name (imported reference runs' other figures)
    other_pages: PageMaker | None = None
    #: the title page's table of tests (None: none); the default lists each test's status,
    #: rounds and outcome (report/parts.py)
    title_table: TitleTable | None = tests_table

    def pages_of(self, test: str) -> PageMaker | None:
        return self.pages.get(test_kind(test), self.other_pages)

    def show_of(self, test: str) -> ShowLines | None:
        return self.show.get(test_kind(test))


def result_of(test: TestData, record: type[R]) -> R:
    """``test``'s stored result read as ``record`` (StoredDataError when it does not fit)."""
    return record.from_json(test.result, f"{test.name} result")


