"""The report's part of the suite contract: a suite's report pages, its ``ssdlab show``
lines, its overlay in a comparison, and what ``ssdlab run`` prints when a run ends.

Each suite's pages module defines one :class:`SuitePages` named ``PAGES``; the registry
(:mod:`ssdlab.suites`) finds it. Everything here reads stored runs only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ssdlab.jsonrecord import Record
from ssdlab.plan.suite import QUICK_TEXT
from ssdlab.report.figures import test_kind
from ssdlab.report.html import Page
from ssdlab.store.records import RunData, TestData

R = TypeVar("R", bound=Record)

#: the report pages of one test: (run, test, anchor) -> pages
PageMaker = Callable[[RunData, TestData, str], list[Page]]
#: the lines ``ssdlab show`` prints under a test's heading: (run, test) -> lines
ShowLines = Callable[[RunData, TestData], list[str]]
#: a comparison's overlay of the runs it can compare: (runs, their labels) -> HTML
Overlay = Callable[[Sequence[RunData], Sequence[str]], str]


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
    #: the title page's table of tests: "pts" (rule, tracking, load, purge, outcome of
    #: each test with rounds), "tests" (status, rounds, outcome) or "none"
    title_table: str = "tests"

    def pages_of(self, test: str) -> PageMaker | None:
        return self.pages.get(test_kind(test), self.other_pages)

    def show_of(self, test: str) -> ShowLines | None:
        return self.show.get(test_kind(test))


def result_of(test: TestData, record: type[R]) -> R:
    """``test``'s stored result read as ``record`` (StoredDataError when it does not fit)."""
    return record.from_json(test.result, f"{test.name} result")


def quick_text(suite: str) -> str:
    """What a quick run of ``suite`` is, in its suite's own words (its spec's
    ``quick_text``: what the profile shortens and what the result is not)."""
    from ssdlab.suites import find
    found = find(suite)
    return found.spec.quick_text if found is not None else QUICK_TEXT


def quick_summary(suites: Iterable[str]) -> str:
    """What quick runs of ``suites`` are: their suite's words where they share them, else
    what every quick run is."""
    texts = {quick_text(s) for s in suites}
    return texts.pop() if len(texts) == 1 else QUICK_TEXT


def quick_banner(suites: Iterable[str]) -> str:
    """``QUICK PROFILE: ...``, the banner of quick runs of ``suites``."""
    return f"QUICK PROFILE: {quick_summary(suites)}"
