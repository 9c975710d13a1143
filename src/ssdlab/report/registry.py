"""The report's one way into the suite registry (:mod:`ssdlab.suites`): a stored run's
registered pages, the comparison overlays of every suite, what a quick run of a suite
is in its own words, and what a report of runs is (its title). Only the dispatchers
import this (the run's pages and title page, ``show``, the report, comparisons,
``serve`` and the CLI); a suite's pages module never does, so that no pages module
looks another suite up.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ssdlab.plan.suite import QUICK_TEXT
from ssdlab.report.suite import Overlay, SuitePages
from ssdlab.store.records import RunData

#: the kind of a report of runs whose suites give different ones
COMPARISON_TITLE = "comparison report"
#: the kind of a report of runs of a suite this ssdlab does not know
UNKNOWN_TITLE = "ssdlab report"


def pages_of(run: RunData) -> SuitePages | None:
    """The registered pages of the run's suite (None: a suite this ssdlab does not know)."""
    from ssdlab.suites import find
    suite = find(run.suite)
    return suite.pages() if suite is not None else None


def overlays() -> list[Overlay]:
    """The overlays of the registered suites (their pages' ``overlay``), in the registry's
    order, each once (suites that share pages share it)."""
    from ssdlab.suites import all_suites
    found: list[Overlay] = []
    for suite in all_suites():
        overlay = suite.pages().overlay
        if overlay is not None and overlay not in found:
            found.append(overlay)
    return found


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


def _kind(run: RunData) -> str:
    """What a run's pages are: its suite's ``report_title``."""
    from ssdlab.suites import find
    suite = find(run.suite)
    return suite.spec.report_title if suite is not None else UNKNOWN_TITLE


def run_kinds(runs: Sequence[RunData]) -> list[str]:
    """What the runs' pages are (each one's suite's ``report_title``), each kind once, in
    the runs' order: what the report's cover says it holds."""
    return list(dict.fromkeys(_kind(r) for r in runs))


def report_title(runs: Sequence[RunData]) -> str:
    """What the report is, after "LABEL: " in its title: the ``report_title`` of the runs'
    suites, one kind or else a "comparison report". Reference runs (imported read-only)
    take the kind of the runs they are compared with; alone, their own."""
    measured = [r for r in runs if not r.read_only] or runs
    kinds = set(run_kinds(measured))
    return kinds.pop() if len(kinds) == 1 else COMPARISON_TITLE
